"""/crcr/metrics: series per backend, from the same cached buckets as the summary: per hour for
the short ranges (so a sandbox a few minutes old already draws lines), per UTC day otherwise
(whole days, and today's hours merged into today)."""

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.utils import timezone

from relay.models import Level, Project
from relay.stats.windows import WINDOWS
from relay.tallies.buckets import Bucket, window_buckets
from relay.tallies.rollups import bucket_tallies
from relay.tallies.tally import Tally, tallies_merge, tally_sum

HOURLY_WINDOWS = {"24h": 24}
"""Ranges charted by the hour; the others (relay.stats.windows.WINDOWS, the same on every page) by the day."""
"""Ranges drawn hour by hour (the value: how many hours)."""
LEVEL_FILTERS = {"all": "All levels", Level.L4: "L4", Level.L3: "L3", Level.L2: "L2"}
"""L1 is not offered: L1 backends have no results to chart."""


@dataclass
class BackendSeries:
    project: Project
    days: list
    """One Tally per day, None on days without a single job for this backend."""

    @property
    def has_data(self) -> bool:
        return any(self.days)

    def values(self, pick) -> list:
        return [pick(t) if t is not None else None for t in self.days]


@dataclass
class Metrics:
    days: list
    """The points' start: UTC days, or hours (datetimes) when `hourly`."""
    series: list
    combined: list
    """One Tally per point over every backend in view (for the timing quantiles)."""
    tab: str
    hourly: bool = False

    @property
    def with_data(self) -> list:
        return [s for s in self.series if s.has_data]

    @property
    def points_with_data(self) -> int:
        return sum(1 for total in self.combined if total is not None and (total.verdicts or total.attempts))


def daily_tallies(days: int, now: datetime) -> list[tuple[date, dict]]:
    """[(UTC day, {(project_id, kind): Tally})], oldest first; today merges its hours so far."""
    buckets = window_buckets(days, now)
    per_day: dict[date, list] = {}
    for bucket, tallies in zip(buckets, bucket_tallies(buckets, now)):
        per_day.setdefault(bucket.start.date(), []).append(tallies)
    return [(day, parts[0] if len(parts) == 1 else tallies_merge(parts)) for day, parts in per_day.items()]


def hourly_tallies(hours: int, now: datetime) -> list[tuple[datetime, dict]]:
    """[(UTC hour, {(project_id, kind): Tally})] for the last `hours` hours, the current one partial."""
    hour = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    buckets = [Bucket(hour - timedelta(hours=h), hour - timedelta(hours=h - 1)) for h in range(hours - 1, -1, -1)]
    return [(bucket.start, tallies) for bucket, tallies in zip(buckets, bucket_tallies(buckets, now), strict=True)]


def backends_in_view(level: str, backend: str) -> list[Project]:
    projects = Project.objects.filter(active=True, is_health_probe=False).exclude(level=Level.L1)
    if level != "all":
        projects = projects.filter(level=level)
    if backend:
        projects = projects.filter(full_name__iexact=backend)
    return list(projects.order_by("level", "position", "full_name"))


def charted_backends() -> list[Project]:
    return list(
        Project.objects.filter(active=True, is_health_probe=False).exclude(level=Level.L1).order_by("full_name")
    )


def metrics_build(window_key: str, tab: str, level: str, backend: str, now: datetime | None = None) -> Metrics:
    now = now or timezone.now()
    hourly = window_key in HOURLY_WINDOWS
    points = hourly_tallies(HOURLY_WINDOWS[window_key], now) if hourly else daily_tallies(WINDOWS[window_key].days, now)
    projects = backends_in_view(level, backend)
    series = [BackendSeries(p, [_nonempty(tallies.get((p.pk, tab))) for _, tallies in points]) for p in projects]
    combined = [tally_sum(s.days[i] for s in series if s.days[i] is not None) for i in range(len(points))]
    return Metrics([start for start, _ in points], series, combined, tab, hourly)


def _nonempty(tally: Tally | None) -> Tally | None:
    """A day with no job at all is a gap in the charts, never a zero."""
    if tally is None or (not tally.verdicts and not tally.attempts):
        return None
    return tally
