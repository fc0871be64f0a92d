"""/crcr/metrics' series: hour by hour for the short ranges, so a sandbox that has run for an hour
or two draws lines rather than one dot per backend; per day for the long ones."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hud.selectors_metrics import metrics_build
from tests.hud.test_selectors_summary import job, project  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]


def test_the_last_24_hours_are_drawn_hour_by_hour():
    now = timezone.now().replace(minute=30, second=0, microsecond=0)
    backend = project(level="L2")
    for hours_ago, sha in ((0, "a"), (1, "b"), (3, "c")):
        job(backend, sha=sha * 40, at=now - timedelta(hours=hours_ago, minutes=25))
    metrics = metrics_build("24h", "pr", "all", "", now=now)
    assert metrics.hourly and len(metrics.days) == 24 and metrics.days[-1] == now.replace(minute=0)
    with_jobs = [start for start, tally in zip(metrics.days, metrics.series[0].days, strict=True) if tally is not None]
    assert with_jobs == [now.replace(minute=0) - timedelta(hours=h) for h in (3, 1, 0)]
    assert metrics.points_with_data == 3


def test_a_day_is_24_hours_and_the_long_ranges_stay_daily():
    now = timezone.now().replace(minute=30, second=0, microsecond=0)
    job(project(level="L2"), at=now - timedelta(minutes=20))
    assert len(metrics_build("24h", "pr", "all", "", now=now).days) == 24
    monthly = metrics_build("30d", "pr", "all", "", now=now)
    assert not monthly.hourly and len(monthly.days) == 30 and monthly.points_with_data == 1


def test_a_fresh_sandbox_on_a_daily_range_is_pointed_at_the_hourly_view(client):
    job(project(level="L2"), at=timezone.now() - timedelta(minutes=20))
    page = client.get("/crcr/metrics?range=30d").content.decode()
    assert "see the last 24 hours hour by hour" in page and 'href="?range=24h&amp;event=pr"' in page
    hourly = client.get("/crcr/metrics?range=24h").content.decode()
    assert "Pass rate per hour (UTC)" in hourly and "see the last 24 hours" not in hourly
