"""Every task the worker runs, in one index (Celery's autodiscovery imports this module). Each
task lives next to the service it calls; the ones without a package of their own are here.
Registered names are pinned with name= ("relay.…"), so queued messages and beat entries keep
working whichever module a task lives in."""

from celery import shared_task

from .bisect.tasks import bisection_job_react, bisection_start, bisections_sweep
from .checks.tasks import (
    delivery_react,
    dispatch_react,
    job_react,
    upstream_react,
    upstream_write_send,
    upstream_write_sweep,
)
from .dispatch.tasks import delivery_fan_out, dispatch_send_task, dispatch_sweep, results_sweep_task
from .enablement.tasks import module_counts_sweep
from .github.tasks import installations_sync_task
from .health import heartbeat_record
from .levels.tasks import demotion_prs_reconcile, notification_events_detect, rollups_refresh_task
from .notify.tasks import issue_occurrences_record, notification_digests, notification_send, notification_sweep
from .reference.imports import reference_import_sweep
from .testlevel.tasks import test_store_sweep

__all__ = [
    "alerts_evaluate_task",
    "bisection_job_react",
    "bisection_start",
    "bisections_sweep",
    "delivery_fan_out",
    "delivery_react",
    "demotion_prs_reconcile",
    "dispatch_react",
    "dispatch_send_task",
    "dispatch_sweep",
    "heartbeat",
    "installations_sync_task",
    "issue_occurrences_record",
    "job_react",
    "module_counts_sweep",
    "notification_digests",
    "notification_events_detect",
    "notification_send",
    "notification_sweep",
    "reference_import_sweep_task",
    "results_sweep_task",
    "retention_sweep_task",
    "rollups_refresh_task",
    "test_store_sweep",
    "upstream_react",
    "upstream_write_send",
    "upstream_write_sweep",
]


@shared_task(name="relay.alerts_evaluate", acks_late=True, soft_time_limit=50, time_limit=60)
def alerts_evaluate_task() -> list[str]:
    """The relay's health alerts (relay/alerts.py), every minute: the rules firing now."""
    from .alerts import alerts_evaluate

    return [reading.rule for reading in alerts_evaluate() if reading.firing]


@shared_task(name="relay.heartbeat", ignore_result=True)
def heartbeat() -> None:
    heartbeat_record()


@shared_task(name="relay.reference_import_sweep", acks_late=True, soft_time_limit=240, time_limit=290)
def reference_import_sweep_task() -> list[str]:
    return reference_import_sweep(hours=48, limit=20)


@shared_task(name="relay.retention_sweep", acks_late=True, soft_time_limit=600, time_limit=660)
def retention_sweep_task() -> dict:
    from .retention import retention_sweep

    return retention_sweep()
