"""Oversized bodies get a 413 the client actually reads — through a real gunicorn, with a client
that, like curl or requests, sends the whole body before reading the answer."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from relay.inputs.bodies import DRAIN_MAX_BYTES

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def gunicorn(tmp_path_factory):
    var = tmp_path_factory.mktemp("gunicorn")
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith(("GITHUB_", "CRCR_"))
    }
    env.update(CRCR_VAR_DIR=str(var), DATABASE_URL=f"sqlite:///{var / 'db.sqlite3'}", PYTHONUNBUFFERED="1")
    log = (var / "gunicorn.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "crcr.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--threads",
            "4",
            "--timeout",
            "30",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    yield port
    process.terminate()
    process.wait(timeout=10)
    log.close()


def post_all_then_read(port: int, path: str, size: int) -> bytes:
    """Send headers and every byte of the body, then read the answer (no Expect: 100-continue)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\r\n"
        sock.sendall(head.encode())
        chunk, sent = b"a" * 65536, 0
        while sent < size:
            sent += sock.send(chunk[: min(len(chunk), size - sent)])
        answer = b""
        while b"\r\n\r\n" not in answer:
            data = sock.recv(4096)
            if not data:
                break
            answer += data
        return answer


@pytest.mark.parametrize(
    "path, size",
    [
        ("/github/callback", 15 * 1024 * 1024),
        ("/github/callback", 3 * 1024 * 1024),
        ("/github/webhook", 30 * 1024 * 1024),
    ],
)
def test_an_oversized_body_is_answered_413_after_the_client_has_sent_it(gunicorn, path, size):
    answer = post_all_then_read(gunicorn, path, size)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_a_connection_survives_a_413_and_serves_the_next_request(gunicorn):
    with socket.create_connection(("127.0.0.1", gunicorn), timeout=30) as sock:
        size = 3 * 1024 * 1024
        sock.sendall(
            f"POST /github/callback HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {size}\r\n\r\n".encode()
            + b"a" * size
        )
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        seen = b""
        deadline = time.monotonic() + 20
        while seen.count(b"HTTP/1.1 ") < 2 and time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                break
            seen += data
    assert seen.startswith(b"HTTP/1.1 413") and seen.count(b"HTTP/1.1 ") == 2, seen[:300]


def test_the_drain_is_bounded(client):
    assert DRAIN_MAX_BYTES <= 64 * 1024 * 1024
    response = client.generic("POST", "/github/callback", b"x" * (2 * 1024 * 1024 + 1), content_type="application/json")
    assert response.status_code == 413
