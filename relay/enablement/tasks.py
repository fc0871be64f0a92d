"""The module counts' beat task (relay.enablement.counts.counts_sweep)."""

from relay.queues import FOLLOW_UP, relay_task

from .counts import counts_sweep


@relay_task("relay.module_counts_sweep", FOLLOW_UP, acks_late=True, soft_time_limit=50, time_limit=60)
def module_counts_sweep() -> int:
    """Every job completed since the last run with module counts in its body, into ModuleCount."""
    return counts_sweep()
