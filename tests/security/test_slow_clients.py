"""Slow clients cannot starve the web tier: through a real gunicorn started with the production
configuration (crcr/gunicorn_conf.py), twice as many clients as it has threads send a callback
body a byte at a time; each is answered 408 once the body deadline passes, and meanwhile
/healthz and a callback from a normal client are answered. Timeouts are generous (the deadline
is 2 s, every wait allows 60 s): the test asserts what happens, not how fast."""

import http.client
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
THREADS = 4
SLOW_CLIENTS = 2 * THREADS
DEADLINE_SECONDS = 2
WAIT = 60.0
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    var = tmp_path_factory.mktemp("slow-clients")
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith(("GITHUB_", "CRCR_", "GUNICORN_"))
    }
    env.update(
        CRCR_VAR_DIR=str(var),
        DATABASE_URL=f"sqlite:///{var / 'db.sqlite3'}",
        PYTHONUNBUFFERED="1",
        GUNICORN_BIND=f"127.0.0.1:{port}",
        WEB_CONCURRENCY="1",
        GUNICORN_THREADS=str(THREADS),
        CRCR_BODY_READ_SECONDS=str(DEADLINE_SECONDS),
    )
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=240)
    log = (var / "gunicorn.log").open("wb")
    command = [sys.executable, "-m", "gunicorn", "-c", "python:crcr.gunicorn_conf", "crcr.wsgi:application"]
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5)
            break
        except urllib.error.HTTPError:
            break  # it answers (503 without a worker heartbeat is an answer)
        except OSError:
            time.sleep(0.3)
    yield port
    process.terminate()
    process.wait(timeout=30)
    log.close()


class SlowClient(threading.Thread):
    """POSTs a 4 KB callback body one byte every 0.25 s, reading whatever the server answers."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port, self.answer, self.started = port, b"", threading.Event()

    def run(self):
        head = (
            "POST /github/callback HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "Authorization: Bearer x\r\nContent-Length: 4096\r\n\r\n{"
        )
        with socket.create_connection(("127.0.0.1", self.port), timeout=WAIT) as sock:
            sock.sendall(head.encode())
            self.started.set()
            selector = selectors.DefaultSelector()
            selector.register(sock, selectors.EVENT_READ)
            end = time.monotonic() + WAIT
            try:
                while time.monotonic() < end:
                    if selector.select(timeout=0.25):
                        data = sock.recv(65536)
                        if not data:
                            return
                        self.answer += data
                        continue
                    sock.send(b" ")
            except OSError:
                return


def status_of(answer: bytes) -> int | None:
    line = answer.split(b"\r\n", 1)[0].split()
    return int(line[1]) if len(line) > 1 and line[1].isdigit() else None


def test_slow_bodies_are_cut_at_the_deadline_while_healthz_and_callbacks_answer(server):
    clients = [SlowClient(server) for _ in range(SLOW_CLIENTS)]
    for client in clients:
        client.start()
    for client in clients:
        assert client.started.wait(WAIT)
    # Every thread of the worker may now be reading a slow body; the deadline frees them.
    try:  # 200, or 503 naming what is down (no worker runs here): either way, answered
        health = urllib.request.urlopen(f"http://127.0.0.1:{server}/healthz", timeout=WAIT).read()
    except urllib.error.HTTPError as answered:
        assert answered.code == 503
        health = answered.read()
    assert json.loads(health)["status"]
    request = urllib.request.Request(
        f"http://127.0.0.1:{server}/github/callback",
        data=b"{}",
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:  # no token: a 401, answered
        urllib.request.urlopen(request, timeout=WAIT)
    assert refused.value.code == 401
    for client in clients:
        client.join(WAIT)
    statuses = [status_of(c.answer) for c in clients]
    assert statuses == [408] * SLOW_CLIENTS, statuses
    assert b"did not arrive within 2 s" in clients[0].answer


class BusyClient(threading.Thread):
    """Sends GET /healthz back to back over one kept-alive connection until told to stop."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port, self.answers, self.failure, self.stop = port, 0, None, threading.Event()

    def run(self):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=WAIT)
        try:
            while not self.stop.is_set():
                conn.request("GET", "/healthz")
                conn.getresponse().read()
                self.answers += 1
        except (OSError, http.client.HTTPException) as exc:
            self.failure = exc
        finally:
            conn.close()


def test_busy_kept_alive_connections_are_served_in_turn_with_a_new_one(server):
    # A thread serves its connection's next request itself while it comes at once
    # (crcr/gunicorn_worker.py); twice as many busy connections as threads still all get answers,
    # on the same connection each time, and a newcomer is answered too.
    busy = [BusyClient(server) for _ in range(SLOW_CLIENTS)]
    for client in busy:
        client.start()
    time.sleep(1.0)
    newcomer = urllib.request.urlopen(f"http://127.0.0.1:{server}/healthz", timeout=WAIT).status
    time.sleep(1.0)
    for client in busy:
        client.stop.set()
        client.join(WAIT)
    assert newcomer == 200
    assert [c.failure for c in busy] == [None] * SLOW_CLIENTS
    assert all(c.answers >= 2 for c in busy), [c.answers for c in busy]
