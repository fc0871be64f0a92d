"""Every task the worker runs, in one index (Celery's autodiscovery imports this module). Each
task lives next to the service it calls, registered by relay.queues.relay_task under its pinned
"relay.…" name on the queue it declares (and under any name an earlier release used), so queued
messages and beat entries keep working whichever module a task lives in."""

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
from .health.tasks import alerts_evaluate_task, heartbeat
from .levels.tasks import (
    demotion_prs_reconcile,
    level_events_detect,
    notification_events_detect,
)
from .notify.tasks import (
    issue_occurrences_record,
    notification_digests,
    notification_send,
    notification_sweep,
    trunk_events_detect_task,
)
from .ops.tasks import retention_sweep_task
from .reference.tasks import reference_import_sweep_task
from .tallies.tasks import rollups_refresh_task
from .teststore.tasks import test_store_sweep

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
    "level_events_detect",
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
    "trunk_events_detect_task",
    "upstream_react",
    "upstream_write_send",
    "upstream_write_sweep",
]
