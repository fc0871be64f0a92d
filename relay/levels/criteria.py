"""Level readiness: the L3 criteria ratified in pytorch/rfcs#102 (reference/relay.md §9.2), checked
over 14 days for promotion and 7 days for demotion, one verdict per criterion.

Pure functions over tallies (relay.tallies.tally.Tally) and a few dates, so every threshold is
tested without a database."""

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.conf import settings

from relay.models import Level

PROMOTION_DAYS = 14
DEMOTION_DAYS = 7

QUEUE_AVG_MAX = 30 * 60
"""Average queue time (dispatch → job start) under 30 min."""
TIMEOUT_RATE_MAX = 0.01
"""Timed-out or never-started jobs under 1 % of jobs with a result."""
PASS_RATE_MIN = 0.90
"""Job pass rate (latest attempts) at least 90 %, inclusive (upstream's demotion criteria)."""
E2E_P50_MAX = 3 * 3600
"""Median end to end under 3 h, one sample per run (relay.levels.e2e: its queue plus its span), strictly."""
OVERRUN_SECONDS = 3 * 3600
OVERRUN_RATE_MAX = 0.01
"""Fewer than 1 % of jobs run longer than 3 h (#8754 turned "max exec < 3 h" into this rate)."""
DEMOTION_KEYS = ("e2e", "timeouts", "pass_rate")
"""Upstream's demotion criteria, a subset of promotion's: end-to-end p50, timeout rate, pass rate."""
TIME_AT_LEVEL_MIN = timedelta(days=30)
"""At the current level for at least a month before promotion."""
DATA_AGE_MIN = timedelta(days=14)
"""At least two weeks of HUD data before promotion."""


@dataclass(frozen=True)
class Criterion:
    key: str
    label: str
    threshold: str
    value: str
    met: bool | None
    """None: no data to judge by, which never counts as met."""
    note: str = ""
    """For the pass rate: both rates and which one decides."""
    target: float | None = None
    measured: float | None = None
    """The numbers behind `threshold` and `value` (the level-status API's criteria)."""

    @property
    def verdict(self) -> str:
        return {True: "met", False: "not met", None: "no data"}[self.met]

    @property
    def symbol(self) -> str:
        return {True: "✓", False: "✗", None: "–"}[self.met]


@dataclass(frozen=True)
class Sample:
    """How much a window's criteria have to judge by: jobs (never-started dispatches are none) and
    how long the backend has reported results (at most the window)."""

    jobs: int
    hours: float | None

    @property
    def enough(self) -> bool:
        hours = self.hours or 0
        return self.jobs >= settings.CRCR_LEVEL_MIN_JOBS and hours >= settings.CRCR_LEVEL_MIN_DATA_HOURS

    @property
    def text(self) -> str:
        days = "no results yet" if self.hours is None else f"results for {self.hours / 24:.1f} d"
        need = f"{settings.CRCR_LEVEL_MIN_JOBS} jobs over {settings.CRCR_LEVEL_MIN_DATA_HOURS / 24:g} d"
        return f"not enough data yet: {self.jobs} job{'s' if self.jobs != 1 else ''}, {days} (needs {need})"


def window_sample(tally, first_result_at: datetime | None, now: datetime, days: int) -> Sample:
    hours = None if first_result_at is None else min((now - first_result_at).total_seconds() / 3600, days * 24)
    return Sample(tally.rates.decided, hours)


def sampled(criteria: list, sample: Sample) -> list:
    """A criterion on too small a sample is no data: it is neither met nor missed, so it can
    neither demote nor promote, and it says why."""
    if sample.enough:
        return criteria
    return [replace(c, met=None, note=f"{sample.text}{' · ' + c.note if c.note else ''}") for c in criteria]


def level_change(level: str, promotion: list, demotion: list) -> str | None:
    """The one rule: an L2 backend is promoted when every promotion criterion is met; an L3/L4
    backend is demoted ("at risk") when a demotion criterion is missed. No data decides nothing."""
    if level == Level.L2:
        return "promote" if promotion and all(c.met is True for c in promotion) else None
    if level in (Level.L3, Level.L4):
        return "demote" if any(c.met is False for c in demotion) else None
    return None


@dataclass(frozen=True)
class Readiness:
    level: str
    promotion: list
    demotion: list
    headline: str
    outlook: str
    """ready | not_ready | holds | at_risk | no_data | n/a: for styling; the headline says it in words."""
    change: str | None = None
    """level_change: promote, demote (at risk) or None."""

    @property
    def rows(self) -> list[tuple]:
        """(promotion criterion, demotion criterion or None), one row per criterion."""
        demotion = {c.key: c for c in self.demotion}
        return [(c, demotion.get(c.key)) for c in self.promotion]


def _hours(seconds: float | None) -> str:
    if seconds is None:
        return "no data"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def _percent(rate: float | None) -> str:
    return "no data" if rate is None else f"{rate * 100:.1f} %"


def _below(value: float | None, limit: float) -> bool | None:
    return None if value is None else value < limit


def pass_rate_met(rate: float | None) -> bool | None:
    return None if rate is None else rate >= PASS_RATE_MIN


def timeout_rate_met(rate: float | None) -> bool | None:
    return _below(rate, TIMEOUT_RATE_MAX)


def pass_rate_criterion(tally, adjusted=None, basis: str = "adjusted") -> Criterion:
    """On the registry's basis: the upstream-adjusted rate (relay.results.excused) when known,
    else the raw one; the note gives both, so a backend saved by excused failures says so."""
    raw = tally.rates.pass_rate
    if adjusted is None:
        return Criterion(
            "pass_rate",
            "Pass rate (latest attempts)",
            "≥ 90 %",
            _percent(raw),
            pass_rate_met(raw),
            "",
            PASS_RATE_MIN,
            raw,
        )
    rate = adjusted.pass_rate(basis)
    note = (
        f"raw {_percent(raw)} · upstream-adjusted {_percent(adjusted.adjusted_pass_rate)} "
        f"({len(adjusted.excused)} failed job{'s' if len(adjusted.excused) != 1 else ''} excused) · "
        f"{'raw' if basis == 'raw' else 'adjusted'} decides"
    )
    label = "Pass rate (raw)" if basis == "raw" else "Pass rate (upstream-adjusted)"
    return Criterion("pass_rate", label, "≥ 90 %", _percent(rate), pass_rate_met(rate), note, PASS_RATE_MIN, rate)


def health_criteria(tally, adjusted=None, basis: str = "adjusted", e2e_p50: float | None = None) -> list[Criterion]:
    """The criteria a backend must keep meeting; also the first half of promotion. `e2e_p50` is
    upstream's per-run end-to-end median (relay.levels.e2e); None is no data."""
    overrun = tally.execution.share_at_least(OVERRUN_SECONDS)
    return [
        Criterion(
            "queue",
            "Average queue time",
            "< 30 min",
            _hours(tally.queue.mean),
            _below(tally.queue.mean, QUEUE_AVG_MAX),
            target=QUEUE_AVG_MAX,
            measured=tally.queue.mean,
        ),
        Criterion(
            "timeouts",
            "Timeout rate",
            "< 1 %",
            _percent(tally.timeout_rate),
            timeout_rate_met(tally.timeout_rate),
            target=TIMEOUT_RATE_MAX,
            measured=tally.timeout_rate,
        ),
        pass_rate_criterion(tally, adjusted, basis),
        Criterion(
            "e2e",
            "End-to-end p50 (per run)",
            "< 3 h",
            _hours(e2e_p50),
            _below(e2e_p50, E2E_P50_MAX),
            target=E2E_P50_MAX,
            measured=e2e_p50,
        ),
        Criterion(
            "overrun",
            "Jobs running over 3 h",
            "< 1 %",
            _percent(overrun),
            _below(overrun, OVERRUN_RATE_MAX),
            target=OVERRUN_RATE_MAX,
            measured=overrun,
        ),
    ]


def demotion_criteria(tally7, adjusted7=None, basis: str = "adjusted", e2e_p50: float | None = None) -> list[Criterion]:
    return [c for c in health_criteria(tally7, adjusted7, basis, e2e_p50) if c.key in DEMOTION_KEYS]


def tenure_criteria(level_since: datetime | None, first_result_at: datetime | None, now: datetime) -> list[Criterion]:
    at_level = now - level_since if level_since else None
    data_age = now - first_result_at if first_result_at else None
    return [
        Criterion(
            "time_at_level",
            "Time at current level",
            "≥ 30 d",
            _days(at_level),
            None if at_level is None else at_level >= TIME_AT_LEVEL_MIN,
            target=TIME_AT_LEVEL_MIN.days,
            measured=_day_count(at_level),
        ),
        Criterion(
            "data_days",
            "HUD data since",
            "≥ 14 d",
            _days(data_age),
            None if data_age is None else data_age >= DATA_AGE_MIN,
            target=DATA_AGE_MIN.days,
            measured=_day_count(data_age),
        ),
    ]


def _day_count(span: timedelta | None) -> float | None:
    return None if span is None else round(span.total_seconds() / 86400, 2)


def _days(span: timedelta | None) -> str:
    return "no data" if span is None else f"{span.total_seconds() / 86400:.0f} d"


def readiness(
    level: str,
    tally14,
    tally7,
    level_since: datetime | None,
    first_result_at: datetime | None,
    now: datetime,
    adjusted14=None,
    adjusted7=None,
    basis: str = "adjusted",
    e2e14: float | None = None,
    e2e7: float | None = None,
) -> Readiness:
    if level == Level.L1:
        return Readiness(
            level, [], [], "L1 backends report no results, so readiness cannot be judged; register at L2 first.", "n/a"
        )
    sample14 = window_sample(tally14, first_result_at, now, PROMOTION_DAYS)
    sample7 = window_sample(tally7, first_result_at, now, DEMOTION_DAYS)
    promotion = sampled(health_criteria(tally14, adjusted14, basis, e2e14), sample14)
    promotion += tenure_criteria(level_since, first_result_at, now)
    demotion = sampled(demotion_criteria(tally7, adjusted7, basis, e2e7), sample7)
    change = level_change(level, promotion, demotion)
    headline, outlook = _headline(level, promotion, demotion, change, sample14 if level == Level.L2 else sample7)
    excuse = _excuse_note(level, tally7, adjusted7, demotion, basis)
    return Readiness(level, promotion, demotion, f"{headline} {excuse}".strip(), outlook, change)


def _excuse_note(level: str, tally7, adjusted7, demotion: list, basis: str) -> str:
    """Why a backend whose raw pass rate misses the target is not at risk: say it in words."""
    raw = tally7.rates.pass_rate
    held = next((c.met for c in demotion if c.key == "pass_rate"), None)
    if level == Level.L2 or adjusted7 is None or basis == "raw" or not held or pass_rate_met(raw) is not False:
        return ""
    return (
        f"The raw pass rate over 7 days is {_percent(raw)}, below 90 %, but {adjusted7.excused_count} failed "
        f"job{'s' if adjusted7.excused_count != 1 else ''} are excused as upstream's (failures shared with the "
        f"reference or known upstream issues), so the upstream-adjusted {_percent(adjusted7.adjusted_pass_rate)} decides."
    )


SHORTFALLS = {
    "queue": "queue time",
    "timeouts": "timeout rate",
    "pass_rate": "pass rate",
    "e2e": "end-to-end time",
    "overrun": "jobs over 3 h",
    "time_at_level": "a month at its level",
    "data_days": "two weeks of data",
}


def _shortfalls(criteria: list) -> str:
    return ", ".join(SHORTFALLS[c.key] for c in criteria if not c.met)


def _headline(level: str, promotion: list, demotion: list, change: str | None, sample: Sample) -> tuple[str, str]:
    if level == Level.L2:
        if change == "promote":
            return "Ready for L3: every criterion met over 14 days.", "ready"
        if not sample.enough:
            return f"Not judged for L3 yet: {sample.text}.", "no_data"
        return f"Not ready for L3 yet: {_shortfalls(promotion)}.", "not_ready"
    if change == "demote":
        missed = ", ".join(SHORTFALLS[c.key] for c in demotion if c.met is False)
        return f"At risk of demotion from {level}: {missed} over the last 7 days.", "at_risk"
    if not sample.enough:
        return f"Keeps {level}; the criteria are not judged yet: {sample.text}.", "no_data"
    if any(c.met is None for c in demotion):
        return f"Keeps {level}: no criterion is missed over the last 7 days (some have no data).", "holds"
    return f"Meets the L3 criteria over the last 7 days; keeps {level}.", "holds"
