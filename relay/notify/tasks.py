"""Thin tasks for notifications: send one by id, sweep what is due, build yesterday's digests."""

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from .delivery import NOTIFICATIONS
from .digest import digests_build

logger = logging.getLogger(__name__)


@shared_task(name="relay.notification_send", acks_late=True, soft_time_limit=60, time_limit=72)
def notification_send(notification_pk: int) -> str | None:
    return NOTIFICATIONS.send(notification_pk)


@shared_task(name="relay.notification_sweep", acks_late=True)
def notification_sweep() -> int:
    ids = NOTIFICATIONS.due(settings.CRCR_SWEEP_BATCH)
    for pk in ids:
        NOTIFICATIONS.kick(pk)
    return len(ids)


@shared_task(name="relay.notification_digests", acks_late=True)
def notification_digests() -> int:
    """Yesterday's digests (UTC); run shortly after midnight."""
    return len(digests_build((timezone.now() - timedelta(days=1)).date()))
