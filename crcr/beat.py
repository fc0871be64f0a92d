"""Celery beat's scheduler: django_celery_beat's DatabaseScheduler, made safe against a second beat
started by mistake. Each beat keeps its own clock, so two of them would publish every entry twice
per period (two sweeps racing, two digests built, two installation syncs against GitHub's rate
limit). Before publishing, a beat claims the entry's period with a conditional UPDATE on one
RelayState row per entry; the beat that loses the claim skips that period. One beat behaves
exactly as before."""

import logging
from datetime import timedelta

from django.db import DatabaseError, IntegrityError, close_old_connections, transaction
from django.utils import timezone
from django_celery_beat.schedulers import DatabaseScheduler

logger = logging.getLogger(__name__)

CLAIM_SHARE = 0.9
"""A claim holds for 90% of the period: a lone beat fires no sooner than a full period after its
last run, so it always wins; a second beat out of phase by less than the period never does."""


class ClaimingScheduler(DatabaseScheduler):
    def apply_entry(self, entry, producer=None):
        if not self._claimed(entry):
            logger.info("beat: %s was published by another beat this period; skipped", entry.name)
            return
        super().apply_entry(entry, producer=producer)

    def _claimed(self, entry) -> bool:
        # Every periodic task is safe to run twice; none run at all would stall the sweepers. So
        # with the database unreachable the entry is published unclaimed.
        try:
            return period_claim(entry.name, period_seconds(entry.schedule))
        except DatabaseError as exc:
            logger.warning("beat: could not claim %s (%s); publishing it unclaimed", entry.name, exc)
            close_old_connections()  # a broken connection is replaced on the next tick
            return True


def period_seconds(schedule) -> float:
    """An interval's length; for a crontab the time from one run to the next (its period)."""
    return schedule.remaining_estimate(timezone.now()).total_seconds()


def period_claim(name: str, period: float, now=None) -> bool:
    """True for exactly one caller per `CLAIM_SHARE` of the period, whichever process asks."""
    from relay.models import RelayState

    now = now or timezone.now()
    key = f"beat:{name}"[:64]
    held_since = now - timedelta(seconds=max(0.0, period) * CLAIM_SHARE)
    value = {"claimed_at": now.isoformat()}
    if RelayState.objects.filter(key=key, updated_at__lte=held_since).update(value=value, updated_at=now):
        return True
    try:
        with transaction.atomic():
            RelayState.objects.create(key=key, value=value)
            RelayState.objects.filter(key=key).update(updated_at=now)  # auto_now took the wall clock
    except IntegrityError:
        return False  # the row exists and was claimed within the period
    return True
