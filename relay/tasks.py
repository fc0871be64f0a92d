"""Thin Celery tasks: take ids, call one service, let the database rows carry the state."""

import logging

from celery import shared_task
from django.conf import settings

from . import dispatching, installations
from .models import Dispatch

logger = logging.getLogger(__name__)


@shared_task(name="relay.delivery_fan_out", acks_late=True)
def delivery_fan_out(delivery_pk: int) -> int:
    """One send task per pending dispatch row of a delivery; intake publishes only this one."""
    ids = list(Dispatch.objects.filter(delivery_id=delivery_pk, state=Dispatch.State.PENDING).values_list("pk", flat=True))
    for pk in ids:
        dispatch_send.apply_async(args=[pk])
    return len(ids)


@shared_task(name="relay.dispatch_send", acks_late=True, soft_time_limit=60, time_limit=72)
def dispatch_send(dispatch_pk: int) -> str | None:
    """A short retry is kicked again by the outbox once the attempt is recorded."""
    return dispatching.dispatch_send(dispatch_pk)


@shared_task(name="relay.dispatch_sweep", acks_late=True)
def dispatch_sweep() -> int:
    ids = dispatching.dispatches_due(settings.CRCR_SWEEP_BATCH)
    for pk in ids:
        dispatch_send.apply_async(args=[pk])
    if ids:
        logger.info("sweeper re-sent %s dispatches", len(ids))
    return len(ids)


@shared_task(name="relay.installations_sync", acks_late=True)
def installations_sync() -> int:
    return installations.installations_sync()


@shared_task(name="relay.heartbeat", ignore_result=True)
def heartbeat() -> None:
    from .health import heartbeat_record

    heartbeat_record()


@shared_task(name="relay.results_sweep", acks_late=True)
def results_sweep() -> dict:
    from .results_sweep import results_sweep as sweep

    return vars(sweep(limit=settings.CRCR_SWEEP_BATCH))


@shared_task(name="relay.reference_import_sweep", acks_late=True, soft_time_limit=240, time_limit=290)
def reference_import_sweep() -> list[str]:
    from .reference import reference_import_sweep as sweep

    return sweep(hours=48, limit=20)


@shared_task(name="relay.retention_sweep", acks_late=True, soft_time_limit=600, time_limit=660)
def retention_sweep() -> dict:
    from .retention import retention_sweep as sweep

    return sweep()
