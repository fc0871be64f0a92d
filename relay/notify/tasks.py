"""Thin tasks for notifications: record a job's known-issue occurrences (and tell subscribers an
issue is seen again), send one notification by id, sweep what is due, build yesterday's digests."""

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from relay.queues import FOLLOW_UP, relay_task

from ..triage import issues
from .delivery import NOTIFICATIONS, SEND_TASK
from .digest import digests_build
from .events import issues_seen_again

logger = logging.getLogger(__name__)


@relay_task("relay.issue_occurrences_record", FOLLOW_UP, acks_late=True, soft_time_limit=60, time_limit=72)
def issue_occurrences_record(job_run_id: int) -> int:
    """Known-issue occurrences of a job whose result was recorded (relay.follow_up.job_recorded)."""
    created = issues.occurrences_record(job_run_id)
    issues_seen_again(created)
    return len(created)


@relay_task(SEND_TASK, FOLLOW_UP, acks_late=True, soft_time_limit=60, time_limit=72)
def notification_send(notification_pk: int) -> str | None:
    return NOTIFICATIONS.send(notification_pk)


@relay_task("relay.notification_sweep", FOLLOW_UP, acks_late=True)
def notification_sweep() -> int:
    ids = NOTIFICATIONS.due(settings.CRCR_SWEEP_BATCH)
    for pk in ids:
        NOTIFICATIONS.kick(pk)
    return len(ids)


@relay_task("relay.notification_digests", FOLLOW_UP, acks_late=True)
def notification_digests() -> int:
    """Yesterday's digests (UTC); run shortly after midnight."""
    return len(digests_build((timezone.now() - timedelta(days=1)).date()))


@relay_task("relay.trunk_events_detect", FOLLOW_UP, acks_late=True, soft_time_limit=50, time_limit=60)
def trunk_events_detect_task() -> int:
    """Every minute: the events about results on trunk (relay.notify.trunk)."""
    from .trunk import trunk_events_detect

    return len(trunk_events_detect(timezone.now()))
