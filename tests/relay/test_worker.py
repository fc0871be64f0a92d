"""A real Celery worker process (Redis when REDIS_URL is set, else the embedded broker) sending
real dispatches to the stand-in: the happy path, a broker outage at intake, and a worker killed
with SIGKILL in the middle of a send."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from relay.models import Dispatch
from tests.conftest import WEBHOOK_SECRET, fixture_payload
from tests.factories import ProjectFactory

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]
ROOT = Path(__file__).resolve().parents[2]
REPOS = ["intel/torch-xpu-ops", "ROCm/pytorch", "pytorch/openreg-ci"]


def database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


@pytest.fixture
def world(standin, relay_settings):
    standin.add_installation(installation_id=7, account="downstream")
    for index, repo in enumerate(REPOS):
        standin.add_repo(repo, repo_id=500 + index, installation_id=7)
        ProjectFactory(full_name=repo, github_repo_id=500 + index)
    from crcr.celery import app

    app.control.purge()
    return standin


class Worker:
    def __init__(self, standin, **extra_env):
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "GITHUB_API_URL": standin.url,
            "GITHUB_APP_ID": "1001",
            "GITHUB_APP_PRIVATE_KEY": standin.app_private_key_pem,
            "GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET,
            "CRCR_VAR_DIR": str(settings.VAR_DIR),
            "SECRET_KEY": settings.SECRET_KEY,
            **extra_env,
        }
        command = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "crcr",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            "4",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel",
            "INFO",
        ]
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.stdout.read().decode(errors="replace")[-4000:]


@pytest.fixture
def workers():
    started = []
    yield lambda standin, **env: started.append(Worker(standin, **env)) or started[-1]
    for worker in started:
        worker.stop()


def wait_until(predicate, timeout=45.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def all_sent() -> bool:
    return Dispatch.objects.count() == len(REPOS) and not Dispatch.objects.exclude(state="sent").exists()


def test_a_real_worker_sends_every_dispatch_of_a_webhook(world, workers, post_webhook):
    worker = workers(world)
    assert post_webhook("pull_request", fixture_payload("pull_request.opened")).status_code == 202
    assert wait_until(all_sent), worker.stop()
    assert sorted(d["repo"].lower() for d in world.dispatches) == sorted(r.lower() for r in REPOS)


def test_dispatches_accepted_while_the_broker_is_down_are_sent_by_the_sweeper(
    world, workers, post_webhook, monkeypatch
):
    from relay import tasks

    monkeypatch.setattr(
        tasks.delivery_fan_out,
        "apply_async",
        lambda *a, **k: (_ for _ in ()).throw(ConnectionRefusedError("broker down")),
    )
    assert post_webhook("pull_request", fixture_payload("pull_request.opened")).status_code == 202
    assert Dispatch.objects.filter(state="pending").count() == len(REPOS)
    monkeypatch.undo()
    worker = workers(world, CRCR_SWEEP_GRACE_SECONDS="0")
    tasks.dispatch_sweep.apply_async()
    assert wait_until(all_sent), worker.stop()


def test_a_worker_killed_mid_send_leaves_nothing_unsent_after_restart(world, workers, post_webhook):
    world.fail("POST", r"/repos/.*/dispatches", status=None, delay=8.0, times=None)
    first = workers(world, CRCR_DISPATCH_LEASE_SECONDS="3")
    assert post_webhook("pull_request", fixture_payload("pull_request.opened")).status_code == 202
    assert wait_until(lambda: Dispatch.objects.filter(state="sending").exists(), timeout=30), first.stop()
    first.kill()
    world.clear_faults()
    from relay import tasks

    workers(world, CRCR_DISPATCH_LEASE_SECONDS="3", CRCR_SWEEP_GRACE_SECONDS="0")
    time.sleep(3.5)  # the dead worker's lease runs out
    tasks.dispatch_sweep.apply_async()
    assert wait_until(all_sent)
    assert {d["repo"].lower() for d in world.dispatches} == {r.lower() for r in REPOS}


def _sessions() -> int:
    """Connections ever made to the test database (PostgreSQL's own count)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="counts PostgreSQL sessions")
def test_a_worker_keeps_its_database_connections_from_task_to_task(world, workers, post_webhook):
    from tests.conftest import fixture_payload as payload

    worker = workers(world)
    assert post_webhook("pull_request", payload("pull_request.opened")).status_code == 202
    assert wait_until(all_sent), worker.stop()
    before = _sessions()
    for number in (2, 3, 4):
        body = payload("pull_request.opened")
        body["number"] = body["pull_request"]["number"] = 90_000 + number
        body["pull_request"]["head"]["sha"] = f"{number:040x}"
        assert post_webhook("pull_request", body).status_code == 202
    expected = 4 * len(REPOS)
    assert wait_until(lambda: Dispatch.objects.filter(state="sent").count() == expected), worker.stop()
    time.sleep(1.5)  # backends report their sessions on their own clock
    # Four threads, each of which may connect once (a fan-out and three sends per webhook, and
    # their reactions, made two connections per task before).
    assert _sessions() - before <= 2 * 4
