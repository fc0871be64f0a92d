"""Celery beat's scheduler claims each entry's period (crcr/beat.py), so a second beat started by
mistake publishes nothing twice. The same with real processes: tests/reliability/test_scale_out.py."""

from datetime import UTC, datetime, timedelta

import pytest
from celery.schedules import crontab, schedule
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from crcr.beat import ClaimingScheduler, period_claim, period_seconds
from crcr.celery import app

pytestmark = pytest.mark.django_db
NOON = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def test_it_claims_an_entry_once_per_period():
    assert period_claim("sweep", 60, now=NOON)
    assert not period_claim("sweep", 60, now=NOON)
    assert not period_claim("sweep", 60, now=NOON + timedelta(seconds=50))
    assert period_claim("sweep", 60, now=NOON + timedelta(seconds=60))


def test_each_entry_has_its_own_claim():
    assert period_claim("sweep", 60, now=NOON)
    assert period_claim("digest", 86400, now=NOON)


def test_a_period_is_the_interval_or_the_time_between_two_crontab_runs():
    assert period_seconds(schedule(timedelta(seconds=60))) == pytest.approx(60, abs=1)
    assert period_seconds(crontab(minute="*/5")) <= 300


def test_of_two_beats_due_at_the_same_moment_only_one_publishes(monkeypatch):
    published = []
    monkeypatch.setattr(DatabaseScheduler, "apply_entry", lambda self, entry, producer=None: published.append(self))
    every = IntervalSchedule.objects.create(every=60, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.create(name="every-minute-sweep", task="relay.dispatch_sweep", interval=every)
    beats = [ClaimingScheduler(app=app, lazy=True) for _ in range(2)]
    for beat in beats:
        entry = beat.Entry(PeriodicTask.objects.get(name="every-minute-sweep"), app=app)
        beat.apply_entry(entry)
    assert published == beats[:1]


def test_a_beat_that_cannot_reach_the_database_publishes_unclaimed(monkeypatch):
    from django.db import OperationalError

    import crcr.beat

    def unreachable(name, period):
        raise OperationalError("connection refused")

    published = []
    monkeypatch.setattr(DatabaseScheduler, "apply_entry", lambda self, entry, producer=None: published.append(entry))
    monkeypatch.setattr(crcr.beat, "period_claim", unreachable)
    every = IntervalSchedule.objects.create(every=60, period=IntervalSchedule.SECONDS)
    entry = ClaimingScheduler.Entry(
        PeriodicTask.objects.create(name="every-minute-sweep", task="relay.dispatch_sweep", interval=every), app=app
    )
    ClaimingScheduler(app=app, lazy=True).apply_entry(entry)
    assert published == [entry]
