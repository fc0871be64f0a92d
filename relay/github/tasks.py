"""Thin Celery task for the App's installations."""

from relay.queues import FOLLOW_UP, relay_task

from . import installations


@relay_task("relay.installations_sync", FOLLOW_UP, acks_late=True)
def installations_sync_task() -> int:
    return installations.installations_sync()
