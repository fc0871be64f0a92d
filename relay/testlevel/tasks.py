"""The test store's beat task (relay.testlevel.store.store_sweep)."""

from celery import shared_task

from .store import store_sweep


@shared_task(name="relay.test_store_sweep", acks_late=True, soft_time_limit=240, time_limit=290)
def test_store_sweep() -> int:
    """Every (backend, commit) whose jobs finished since the last run, into the test store."""
    return store_sweep()
