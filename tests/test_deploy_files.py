"""The deployment files: docker-compose runs the production-like stack, .ci/run runs make test."""

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def compose_command() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


@pytest.mark.skipif(compose_command() is None, reason="no docker compose client on this machine")
def test_docker_compose_config_is_valid():
    result = subprocess.run([*compose_command(), "config", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_the_compose_stack_has_web_worker_beat_postgres_and_redis():
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert {"web", "worker", "beat", "db", "redis"} <= set(services)
    assert "gunicorn" in services["web"]["command"]
    assert services["worker"]["command"][:4] == ["celery", "-A", "crcr", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "crcr", "beat"]
    assert "postgres" in services["db"]["image"] and "redis" in services["redis"]["image"]


def test_ci_runs_make_test_against_postgresql_and_redis():
    script = (ROOT / ".ci" / "run").read_text()
    assert "make test" in script and "DATABASE_URL=" in script and "REDIS_URL=" in script
    assert "apt-get install -y -q chromium" in script


def test_the_compose_workers_run_each_queue_with_the_threads_make_run_gives_it():
    from crcr.celery import WORKERS

    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    threads = {}
    for service in services.values():
        command = service.get("command") or []
        if command[:4] == ["celery", "-A", "crcr", "worker"]:
            threads[command[command.index("--queues") + 1]] = int(command[command.index("--concurrency") + 1])
    assert threads == WORKERS
