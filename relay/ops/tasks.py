"""Housekeeping on a schedule: retention (relay.ops.retention)."""

from relay.queues import FOLLOW_UP, relay_task


@relay_task("relay.retention_sweep", FOLLOW_UP, acks_late=True, soft_time_limit=600, time_limit=660)
def retention_sweep_task() -> dict:
    from .retention import retention_sweep

    return retention_sweep()
