"""`manage.py bench` end to end in its tiny configuration: a few seconds per figure over a few
thousand job rows, against SQLite and the embedded broker, or PostgreSQL and Redis when
DATABASE_URL/REDIS_URL say so. It runs in its own database (dropped afterwards) and Redis db 14,
so it never touches the developer's data nor a concurrent `make bench` (which uses db 15).
Concurrent runs of this test (two suites at once) take turns: they would share Redis db 14."""

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(200)]
ROOT = Path(__file__).resolve().parents[1]

EXPECTED = {
    "seed_small": "s",
    "grid_render_small": "ms",
    "seed_large": "s",
    "grid_render_large": "ms",
    "grid_render_ratio": "×",
    "summary_render": "ms",
    "summary_cold_fill": "s",
    "web_peak_rss_pages": "MB",
    "intake_p50_8": "ms",
    "intake_p99_8": "ms",
    "intake_p50_200": "ms",
    "intake_p99_200": "ms",
    "intake_p50_ratio": "×",
    "fanout_completion": "s",
    "fanout_first": "ms",
    "callback_throughput": "accepted/s",
    "callback_p99": "ms",
    "callback_errors": "requests",
    "callback_not_stored": "callbacks",
    "callback_cpu": "ms",
    "floor_throughput": "requests/s",
    "floor_cpu": "ms",
    "callback_floor_ratio": "×",
    "callback_floor_rate_ratio": "×",
    "callback_throughput_1": "accepted/s",
    "callback_vs_public_relay": "×",
    "web_peak_rss": "MB",
    "worker_peak_rss": "MB",
    "teststore_seed": "s",
    "teststore_history": "ms",
    "teststore_flaky": "ms",
    "teststore_record": "ms",
    "enablement_seed": "s",
    "enablement_table_page": "ms",
    "enablement_table_api": "ms",
    "enablement_backend_page": "ms",
    "enablement_backend_api": "ms",
    "causes_page": "ms",
    "causes_cluster": "ms",
}


def test_bench_tiny_run_writes_every_figure(tmp_path):
    out = tmp_path / "tiny-run.json"  # not results.json: --out may name any file
    env = {**os.environ, "CRCR_BENCH_REDIS_DB": "14"}
    env.pop("DJANGO_SETTINGS_MODULE", None)  # manage.py picks crcr.settings, with DATABASE_URL/REDIS_URL as given
    env.pop("CRCR_PUBLIC_RELAY_DIR", None)  # CI has no public relay: the recorded rate, and the figure says so
    command = [
        sys.executable,
        "manage.py",
        "bench",
        "--tiny",
        "--drop",
        "--db-name",
        f"crcr_bench_smoke_{os.getpid()}",
        "--out",
        str(out),
        "--timeout",
        "170",
    ]
    lock_path = ROOT / "var" / "bench" / ".smoke.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=190)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]

    document = json.loads(out.read_text())
    copies = list(tmp_path.glob("tiny-run-*-tiny.json"))  # the configuration's copy, which --both reads back
    assert len(copies) == 1 and json.loads(copies[0].read_text())["figures"] == document["figures"]
    config = document["configuration"]
    assert config["cores"] == os.cpu_count()
    assert config["database"].startswith(
        "PostgreSQL" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "SQLite"
    )
    assert config["broker"].startswith("Redis" if os.environ.get("REDIS_URL") else "embedded")
    assert len(document["git_sha"]) == 40 and document["date"]

    figures = {f["figure"]: f for f in document["figures"]}
    assert set(EXPECTED) <= set(figures), f"missing: {sorted(set(EXPECTED) - set(figures))}"
    for name, unit in EXPECTED.items():
        figure = figures[name]
        assert isinstance(figure["value"], (int, float)) and not isinstance(figure["value"], bool), (
            name,
            figure["value"],
            figure["status"],
        )
        assert figure["unit"] == unit, (name, figure["unit"])
        assert figure["git_sha"] == document["git_sha"] and figure["date"] == document["date"]
        assert figure["configuration"]["database"] == config["database"]
    # What the callback figure claims is checked against the database by the harness itself.
    assert figures["callback_errors"]["value"] == 0, figures["callback_errors"]["details"]
    assert figures["callback_not_stored"]["value"] == 0, figures["callback_not_stored"]["details"]
    assert figures["callback_throughput"]["details"]["accepted"] > 0
    assert figures["callback_vs_public_relay"]["details"]["public_relay_source"].startswith("recorded")
    assert figures["fanout_completion"]["value"] > 0
