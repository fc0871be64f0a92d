"""/crcr/metrics: per-day series per backend, from the same cached buckets as the summary
(whole UTC days, and today's hours merged into today)."""

from dataclasses import dataclass
from datetime import date, datetime

from django.utils import timezone

from hud.selectors_summary import Tally, bucket_tallies, tallies_merge, tally_sum, window_buckets
from relay.models import Level, Project

METRIC_WINDOWS = {"7d": ("Last 7 days", 7), "14d": ("Last 14 days", 14), "30d": ("Last 30 days", 30)}
DEFAULT_METRIC_WINDOW = "30d"
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
    series: list
    combined: list
    """One Tally per day over every backend in view (for the timing quantiles)."""
    tab: str

    @property
    def with_data(self) -> list:
        return [s for s in self.series if s.has_data]


def daily_tallies(days: int, now: datetime) -> list[tuple[date, dict]]:
    """[(UTC day, {(project_id, kind): Tally})], oldest first; today merges its hours so far."""
    buckets = window_buckets(days, now)
    per_day: dict[date, list] = {}
    for bucket, tallies in zip(buckets, bucket_tallies(buckets, now)):
        per_day.setdefault(bucket.start.date(), []).append(tallies)
    return [(day, parts[0] if len(parts) == 1 else tallies_merge(parts)) for day, parts in per_day.items()]


def backends_in_view(level: str, backend: str) -> list[Project]:
    projects = Project.objects.filter(active=True, is_health_probe=False).exclude(level=Level.L1)
    if level != "all":
        projects = projects.filter(level=level)
    if backend:
        projects = projects.filter(full_name__iexact=backend)
    return list(projects.order_by("level", "position", "full_name"))


def backend_choices() -> list[Project]:
    return list(Project.objects.filter(active=True, is_health_probe=False).exclude(level=Level.L1).order_by("full_name"))


def metrics_build(window_key: str, tab: str, level: str, backend: str, now: datetime | None = None) -> Metrics:
    now = now or timezone.now()
    daily = daily_tallies(METRIC_WINDOWS[window_key][1], now)
    projects = backends_in_view(level, backend)
    series = [BackendSeries(p, [_nonempty(tallies.get((p.pk, tab))) for _, tallies in daily]) for p in projects]
    combined = [tally_sum(s.days[i] for s in series if s.days[i] is not None) for i in range(len(daily))]
    return Metrics([day for day, _ in daily], series, combined, tab)


def _nonempty(tally: Tally | None) -> Tally | None:
    """A day with no job at all is a gap in the charts, never a zero."""
    if tally is None or (not tally.verdicts and not tally.attempts):
        return None
    return tally
