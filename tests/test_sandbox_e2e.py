"""`make run` in sandbox mode, end to end: within a minute the stand-in has received well-formed
dispatches and simulated CI has reported results back; one SIGINT stops everything."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def poll(fetch, ready, timeout: float):
    deadline = time.monotonic() + timeout
    value = None
    while time.monotonic() < deadline:
        try:
            value = fetch()
            if ready(value):
                return value
        except (httpx.HTTPError, OSError, ValueError, KeyError):
            pass
        time.sleep(1)
    return value


@pytest.fixture
def stack(tmp_path):
    port = free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL") and not k.startswith(("GITHUB_", "CRCR_"))
    }
    env["CRCR_VAR_DIR"] = str(tmp_path)
    log = (tmp_path / "runstack.log").open("wb")  # a file, not a pipe: an unread pipe would stall the stack
    process = subprocess.Popen(
        [sys.executable, "manage.py", "runstack", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    yield f"http://127.0.0.1:{port}", tmp_path / "sandbox", process
    log.close()
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)


def test_make_run_relays_sandbox_prs_and_shows_results_then_stops_cleanly(stack):
    relay, state, process = stack
    info = poll(lambda: json.loads((state / "standin.json").read_text()), lambda v: v is not None, 60)
    assert info, "the stand-in never started"
    dispatches = poll(
        lambda: httpx.get(f"{info['url']}/_standin/dispatches", timeout=5).json(), lambda d: len(d) >= 8, 90
    )
    assert dispatches and len(dispatches) >= 8, "no sandbox dispatches within the time limit"
    for dispatch in dispatches:
        assert set(dispatch["client_payload"]) == {"event_type", "delivery_id", "payload", "callback_token"}
        assert dispatch["client_payload"]["payload"]["repository"]["full_name"] == "pytorch/pytorch"
    jobs = poll(
        lambda: httpx.get(f"{relay}/api/v1/jobs/?status=completed", timeout=5).json()["results"],
        lambda j: len(j) >= 3,
        90,
    )
    assert jobs and len(jobs) >= 3, "simulated CI results never reached the relay"
    assert httpx.get(f"{relay}/", timeout=10).status_code == 200
    os.killpg(process.pid, signal.SIGINT)
    assert process.wait(timeout=30) is not None
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{relay}/healthz", timeout=2)
