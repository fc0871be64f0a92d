"""Thin Celery tasks for dispatching: take ids, call one service, let the rows carry the state."""

import logging

from django.conf import settings

from relay.queues import DISPATCH, FOLLOW_UP, relay_task

from ..models import Dispatch
from . import results_sweep as sweeper
from . import sending

logger = logging.getLogger(__name__)


@relay_task("relay.delivery_fan_out", DISPATCH, acks_late=True)
def delivery_fan_out(delivery_pk: int) -> int:
    """One send task per pending dispatch row of a delivery; intake publishes only this one."""
    ids = list(
        Dispatch.objects.filter(delivery_id=delivery_pk, state=Dispatch.State.PENDING).values_list("pk", flat=True)
    )
    for pk in ids:
        dispatch_send_task.apply_async(args=[pk])
    return len(ids)


@relay_task(Dispatch.SEND_TASK, DISPATCH, acks_late=True, soft_time_limit=60, time_limit=72)
def dispatch_send_task(dispatch_pk: int) -> str | None:
    """A short retry is kicked again by the outbox once the attempt is recorded."""
    return sending.dispatch_send(dispatch_pk)


@relay_task("relay.dispatch_sweep", DISPATCH, acks_late=True)
def dispatch_sweep() -> int:
    ids = sending.dispatches_due(settings.CRCR_SWEEP_BATCH)
    for pk in ids:
        dispatch_send_task.apply_async(args=[pk])
    if ids:
        logger.info("sweeper re-sent %s dispatches", len(ids))
    return len(ids)


@relay_task("relay.results_sweep", FOLLOW_UP, acks_late=True)
def results_sweep_task() -> dict:
    return vars(sweeper.results_sweep(limit=settings.CRCR_SWEEP_BATCH))
