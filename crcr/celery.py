import os
import sys

from celery import Celery
from celery.schedules import crontab
from celery.signals import task_postrun, task_prerun
from django.db import close_old_connections
from kombu import Queue

from relay.queues import DISPATCH, FOLLOW_UP

from . import broker  # noqa: F401 - registers the embedded crcrfs:// transport
from .env import env

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crcr.settings")

app = Celery("crcr")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

DISPATCH_QUEUE, FOLLOW_UP_QUEUE = DISPATCH, FOLLOW_UP


def route_to_declared_queue(name, args, kwargs, options, task=None, **kw):
    """Each task runs on the queue it declares beside its code (relay.queues.relay_task), also
    when it is sent by its registered name alone (the outbox kicks a send that way)."""
    task = task or app.tasks.get(name)
    queue = getattr(task, "queue", None)
    return {"queue": queue} if queue else None


app.conf.task_default_queue = DISPATCH_QUEUE
app.conf.task_queues = (Queue(DISPATCH_QUEUE), Queue(FOLLOW_UP_QUEUE))
app.conf.task_routes = (route_to_declared_queue,)
WORKERS = {DISPATCH_QUEUE: 32, FOLLOW_UP_QUEUE: 8}
"""Thread count of the worker consuming each queue: the sends are I/O-bound (GitHub's latency),
and a send costs its thread ~4 ms of CPU for ~100-500 ms of waiting: with 16 threads a fan-out
to 50 backends was four waves of GitHub's latency (docs/performance.md, "Fan-out")."""


def worker_command(queue: str, concurrency: int | None = None) -> list[str]:
    """How `make run` and the benchmark start the worker of one queue (one process per queue)."""
    return [
        *(sys.executable, "-m", "celery", "-A", "crcr", "worker", "--queues", queue, "--hostname", f"{queue}@%h"),
        *("--pool", "threads", "--concurrency", str(concurrency or WORKERS[queue])),
        *("--loglevel", "INFO", "--without-gossip", "--without-mingle"),
    ]


DEMOTION_EVERY_SECONDS = float(env("CRCR_DEMOTION_EVERY_SECONDS", "900"))
"""How often the demotion loop decides (relay.demotion_prs_reconcile); the sandbox sets a minute."""

app.conf.beat_schedule = {
    "every-minute-sweep-dispatches": {
        "task": "relay.dispatch_sweep",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-minute-sweep-upstream-writes": {
        "task": "relay.upstream_write_sweep",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-2-minutes-sweep-results": {
        "task": "relay.results_sweep",
        "schedule": 120.0,
        "options": {"expires": 110},
    },
    "every-minute-import-reference-runs": {
        "task": "relay.reference_import_sweep",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-30s-worker-heartbeat": {
        "task": "relay.heartbeat",
        "schedule": 30.0,
        "options": {"expires": 25},
    },
    "every-minute-record-test-store": {
        "task": "relay.test_store_sweep",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-minute-record-module-counts": {
        "task": "relay.module_counts_sweep",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-minute-sweep-bisections": {
        "task": "relay.bisections_sweep",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-6-hours-retention": {
        "task": "relay.retention_sweep",
        "schedule": 6 * 3600.0,
        "options": {"expires": 3600},
    },
    "every-minute-sweep-notifications": {
        "task": "relay.notification_sweep",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-minute-refresh-hud-rollups": {
        "task": "relay.rollups_refresh",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-minute-detect-notification-events": {
        "task": "relay.trunk_events_detect",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-minute-detect-level-events": {
        "task": "relay.level_events_detect",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-minute-evaluate-relay-alerts": {
        "task": "relay.alerts_evaluate",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-15-minutes-reconcile-demotion-prs": {
        "task": "relay.demotion_prs_reconcile",
        "schedule": DEMOTION_EVERY_SECONDS,
        "options": {"expires": max(30.0, DEMOTION_EVERY_SECONDS - 5)},
    },
    "daily-notification-digests": {
        "task": "relay.notification_digests",
        "schedule": crontab(hour=0, minute=10),
        "options": {"expires": 3600},
    },
    "hourly-sync-installations": {
        "task": "relay.installations_sync",
        "schedule": 3600.0,
        "options": {"expires": 600},
    },
}


@app.on_after_configure.connect
def _make_broker_folders(sender, **kwargs):
    # The embedded (filesystem) broker needs its folders before the first publish.
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        if options.get(key):
            os.makedirs(options[key], exist_ok=True)


@task_prerun.connect
@task_postrun.connect
def _connections_kept_as_requests_keep_them(task=None, **kwargs):
    """Around each task, what Django does around each request: close a database connection that
    is too old (CONN_MAX_AGE), broken, or fails its health check (CONN_HEALTH_CHECKS), and keep
    the rest. Celery's Django fixup would close every one, around every task (celery 5.7, unless
    CELERY_DB_REUSE_MAX): each task then opened a new PostgreSQL connection, a backend forked
    per task (docs/performance.md, "Callbacks, 2026-12-06 (later)"). An eager task runs inside
    its caller's request or transaction, whose connection is not the task's to settle."""
    if task is not None and not getattr(task.request, "is_eager", False):
        close_old_connections()
