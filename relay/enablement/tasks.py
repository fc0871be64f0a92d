"""The module counts' beat task (relay.enablement.counts.counts_sweep)."""

from celery import shared_task

from .counts import counts_sweep


@shared_task(name="relay.module_counts_sweep", acks_late=True, soft_time_limit=50, time_limit=60)
def module_counts_sweep() -> int:
    """Every job completed since the last run with module counts in its body, into ModuleCount."""
    return counts_sweep()
