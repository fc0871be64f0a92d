"""Thin Celery tasks for the upstream writes: take ids, call the outbox, let the rows carry state."""

import logging

from celery import shared_task
from django.conf import settings

from . import outbox

logger = logging.getLogger(__name__)


@shared_task(name="relay.upstream_write_send", acks_late=True, soft_time_limit=60, time_limit=72)
def upstream_write_send(write_pk: int) -> str | None:
    return outbox.write_send(write_pk)


@shared_task(name="relay.upstream_write_sweep", acks_late=True)
def upstream_write_sweep() -> int:
    ids = outbox.writes_due(settings.CRCR_SWEEP_BATCH)
    for pk in ids:
        upstream_write_send.apply_async(args=[pk])
    if ids:
        logger.info("sweeper re-sent %s upstream writes", len(ids))
    return len(ids)


@shared_task(name="relay.upstream_react", acks_late=True, soft_time_limit=60, time_limit=72)
def upstream_react(kind: str, ids: dict) -> None:
    """Check runs, gate, oncall and re-runs reacting to what intake, dispatch or a callback
    recorded (see receivers.react)."""
    from .reactions import REACTIONS

    REACTIONS[kind](**ids)
