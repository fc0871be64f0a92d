"""What a backend's level criteria read: its windowed tallies (relay.tallies) and excused
failures over 14 and 7 days, upstream's per-run E2E P50, when it reached its level and first
reported; and the criteria judged on them (relay.levels.criteria). The backend page, /crcr's
chips, /api/v1/level-status, the at-risk notification and the demotion loop all start here."""

from dataclasses import dataclass
from datetime import datetime

from relay.models import JobRun, Level, LevelChange, Project
from relay.results.excused import AdjustedRates, adjusted_rates
from relay.stats.runkinds import Figure, jobs_counted
from relay.tallies.buckets import window_buckets
from relay.tallies.excused import window_excused
from relay.tallies.rollups import rollups_state, window_tallies
from relay.tallies.tally import Tally

from . import criteria as readiness_rules
from .e2e import e2e_p50s


@dataclass
class LevelHistory:
    """The registry's audit of a backend's level: every change (newest first) with who or what
    decided it and why, since when it holds its level, and since when it has reported results
    (L2 or above) without a break, which a promotion does not reset."""

    changes: list
    level_since: datetime
    reporting_since: datetime | None


def level_history(project: Project, limit: int = 50) -> LevelHistory:
    changes = list(LevelChange.objects.filter(project=project).order_by("-changed_at", "-id"))  # an audit: short
    return LevelHistory(changes[:limit], level_since(project), reporting_since(project, changes[::-1]))


def reporting_since(project: Project, oldest_first: list) -> datetime | None:
    """When the backend last came up to L2 or above (from L1, or registered there); None at L1.
    A promotion (L2 → L3) or demotion within L2–L4 keeps the date: the time counts on."""
    if project.level == Level.L1:
        return None
    since = project.created_at
    for change in oldest_first:
        if change.to_level == Level.L1:
            since = None
        elif since is None or not change.from_level or change.from_level == Level.L1:
            since = change.changed_at
    return since


def level_since(project: Project) -> datetime:
    change = LevelChange.objects.filter(project=project, to_level=project.level).order_by("-changed_at", "-id").first()
    return change.changed_at if change else project.created_at


def first_result_at(project: Project) -> datetime | None:
    """When the backend's first run the tallies count completed: a probe or a PR's closing
    clean-up is not a result of its own (relay.stats.runkinds), so it starts no tenure."""
    return (
        jobs_counted(Figure.TALLIES)
        .filter(project=project, status=JobRun.Status.COMPLETED)
        .order_by("created_at")
        .values_list("created_at", flat=True)
        .first()
    )


@dataclass
class ReadinessInputs:
    """What the level criteria read: PR/push tallies and the excused failures over 14 and 7 days."""

    tally14: Tally
    tally7: Tally
    adjusted14: AdjustedRates
    adjusted7: AdjustedRates
    e2e14: float | None = None
    e2e7: float | None = None
    """Upstream's per-run end-to-end p50 over 14 and 7 days (hud.e2e)."""


def readiness_inputs(project: Project, now: datetime, listed: bool = True) -> ReadinessInputs:
    """Over PR and push jobs: the L3 criteria are about the check runs PRs get. `listed`: the
    excused failures as a list (the backend page, /api/v1/level-status and the demotion loop show or
    log them); else their stored counts (relay.tallies.excused: the same rule's answer, kept by
    the hourly refresh), as /crcr's rows read them — running the rule for every chip took /crcr
    59 s of a 91 s cold render at a million job rows (docs/performance.md, "sixth round")."""
    key = (project.pk, "pr")
    tally14 = window_tallies(readiness_rules.PROMOTION_DAYS, now).get(key) or Tally()
    tally7 = window_tallies(readiness_rules.DEMOTION_DAYS, now).get(key) or Tally()
    adjusted = window_adjusted if listed else window_adjusted_stored
    e2e14, e2e7 = e2e_p50s(
        project,
        [
            window_buckets(days, now)[0].start
            for days in (readiness_rules.PROMOTION_DAYS, readiness_rules.DEMOTION_DAYS)
        ],
    )
    return ReadinessInputs(
        tally14,
        tally7,
        adjusted(project, tally14, readiness_rules.PROMOTION_DAYS, now),
        adjusted(project, tally7, readiness_rules.DEMOTION_DAYS, now),
        e2e14,
        e2e7,
    )


def backend_readiness(project: Project, now: datetime, inputs: ReadinessInputs | None = None):
    inputs = inputs or readiness_inputs(project, now)
    return readiness_rules.readiness(
        project.level,
        inputs.tally14,
        inputs.tally7,
        level_since(project),
        first_result_at(project),
        now,
        inputs.adjusted14,
        inputs.adjusted7,
        project.level_pass_rate,
        inputs.e2e14,
        inputs.e2e7,
    )


def window_adjusted(project: Project, tally: Tally, days: int, now: datetime) -> AdjustedRates:
    """The tally's raw rates and the failed jobs excused over the same window (relay.results.excused)."""
    return adjusted_rates(project, tally.rates, window_buckets(days, now)[0].start)


def window_adjusted_stored(project: Project, tally: Tally, days: int, now: datetime) -> AdjustedRates:
    """The same, the excused failures counted from the stored hourly counts (relay.tallies.excused)."""
    state = rollups_state()
    excused = window_excused(window_buckets(days, now)[0].start, now, state.generation if state else 0)
    return AdjustedRates(tally.rates, stored=excused[project.pk])
