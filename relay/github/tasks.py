"""Thin Celery task for the App's installations."""

from celery import shared_task

from . import installations


@shared_task(name="relay.installations_sync", acks_late=True)
def installations_sync_task() -> int:
    return installations.installations_sync()
