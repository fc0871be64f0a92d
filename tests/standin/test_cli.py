"""`python -m standin` as sandbox mode runs it: its own process, state on disk, clean stop."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _start(state_dir: Path) -> tuple[subprocess.Popen, dict]:
    command = [
        sys.executable,
        "-m",
        "devtools.standin",
        "--port",
        "0",
        "--state-dir",
        str(state_dir),
        "--app-id",
        "4242",
    ]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    info_path, deadline = state_dir / "standin.json", time.monotonic() + 15
    while not info_path.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"standin did not start: {process.communicate()}")
        time.sleep(0.05)
    return process, json.loads(info_path.read_text())


def _stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    return process.wait(timeout=10)


def test_it_serves_and_writes_its_state_then_stops_cleanly(tmp_path):
    process, info = _start(tmp_path)
    try:
        assert info["pid"] == process.pid and info["app_id"] == 4242
        assert Path(info["app_private_key_path"]).read_text().startswith("-----BEGIN PRIVATE KEY-----")
        assert httpx.get(f"{info['url']}/rate_limit").status_code == 200
    finally:
        assert _stop(process) == 0
    assert not (tmp_path / "standin.json").exists()


def test_it_keeps_the_app_key_across_restarts(tmp_path):
    process, _ = _start(tmp_path)
    _stop(process)
    key = (tmp_path / "app-key.pem").read_text()
    process, _ = _start(tmp_path)
    _stop(process)
    assert (tmp_path / "app-key.pem").read_text() == key
