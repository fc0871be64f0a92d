"""One backend's enablement: its modules on its newest counted trunk commit beside the
reference's, the modules that newly skip more (a team answers an upstream break by skipping,
and coverage then drops without a failure), the tests passing while expected to fail (to
un-skip), and its enabled tests per path over the window (relay.enablement.table's reads)."""

from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from django.utils import timezone

from relay.models import Project, TestOutcome
from relay.policy.testids import report_ids
from relay.results.cells import cells_for_commits, failed_tests_for_jobs, reported_environment

from .paths import rules
from .table import (
    WINDOW_DAYS,
    CountedOn,
    OutcomeCounts,
    by_path,
    counted_commits,
    module_counts,
    passed_by_path,
    reference_commit,
    skip_rises_of,
    variant_counts,
)

SKIP_LOOKBACK = 60
"""Counted trunk commits read back for a module's rise in skips."""
MAX_CANDIDATES = 200


@dataclass(frozen=True)
class SkipRise:
    """A module skipping `added` more tests (skipped and expected failures) than before `sha`."""

    added: int
    sha: str


@dataclass
class ModuleLine:
    module: str
    path: str
    counts: OutcomeCounts
    reference: OutcomeCounts | None
    rise: SkipRise | None = None


@dataclass
class BackendEnablement:
    project: Project
    reference: Project | None
    commit: CountedOn | None
    reference_commit: CountedOn | None
    modules: list[ModuleLine] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    """Tests passing while expected to fail (xpassed) on the newest counted commit."""
    variants: list[str] = field(default_factory=list)
    """The hardware variants with counts on that commit, when the backend declares variant keys."""


def backend_enablement(
    project: Project, reference: Project | None, path: str = "", now=None, variant: str | None = None
) -> BackendEnablement:
    """`project`'s modules (only `path`'s when given; only `variant`'s jobs' when given, the
    skips and candidates staying the backend's), each with the reference's counts."""
    now = now or timezone.now()
    ids = [project.pk] + ([reference.pk] if reference and reference.pk != project.pk else [])
    counted = counted_commits(ids, now, enough=lambda _, found: len(found) >= SKIP_LOOKBACK)
    mine = counted.get(project.pk, [])
    if not mine:
        return BackendEnablement(project, reference, None, None)
    theirs = counted.get(reference.pk, []) if reference else []
    ref_commit = reference_commit(mine[0], reference, theirs)
    pairs = [(mine[0].sha, project)] + ([(ref_commit.sha, reference)] if ref_commit else [])
    counts = module_counts(pairs)
    ref_counts = counts[(ref_commit.sha, reference.pk)] if ref_commit else {}
    rises = skip_rises(project, mine)
    in_force = rules()
    per_variant = variant_counts(mine[0].sha, project) if project.variant_keys else {}
    own = counts[(mine[0].sha, project.pk)] if variant is None else per_variant.get(variant, {})
    lines = [
        ModuleLine(module, line_path, c, ref_counts.get(module), rises.get(module))
        for line_path, modules in by_path(own, in_force).items()
        for module, c in sorted(modules.items())
        if not path or line_path == path
    ]
    view = BackendEnablement(project, reference, mine[0], ref_commit, lines, unskip_candidates(project, mine[0].sha))
    view.variants = sorted(per_variant) if set(per_variant) - {""} else []
    return view


def skip_rises(project: Project, counted: list[CountedOn]) -> dict[str, SkipRise]:
    """Per module whose skipped + expected-failure count stands higher on the newest counted
    commit than before its latest rise: how many more, since the commit of that rise (a rise
    whose count has fallen back to where it was reads nothing; table.skip_rises_of)."""
    commits = list(reversed(counted[:SKIP_LOOKBACK]))
    rises = skip_rises_of([(c.sha, project) for c in commits])
    return {module: SkipRise(added, commits[at].sha) for module, (at, added) in rises.items()}


def unskip_candidates(project: Project, sha: str) -> list[str]:
    """The test ids the latest attempts on `sha` passed while marked as expected to fail."""
    cell = cells_for_commits([sha], [project])[(sha, project.pk)]
    reported = failed_tests_for_jobs([v.job.id for v in cell.verdicts])
    ids = set()
    for tests in reported.values():
        xpassed = [t for t in tests if t["outcome"] == TestOutcome.XPASSED]
        ids.update(tid.full for tid in report_ids(xpassed, project.device_type, reported_environment(xpassed)))
    return sorted(ids)[:MAX_CANDIDATES]


@dataclass(frozen=True)
class DayPoint:
    day: date
    sha: str
    passed: dict[str, int]
    """Per path, the tests passed on the day's newest counted trunk commit."""


def enabled_history(project: Project, now: datetime | None = None, days: int = WINDOW_DAYS) -> list[DayPoint]:
    """Per day of the window with counts, oldest first: what the backend passed per path."""
    now = now or timezone.now()
    newest_of_day: dict[date, CountedOn] = {}
    for commit in counted_commits([project.pk], now, days).get(project.pk, []):
        newest_of_day.setdefault(commit.landed_at.astimezone(UTC).date(), commit)
    pairs = [(c.sha, project) for c in newest_of_day.values()]
    passed = passed_by_path(pairs, rules()) if newest_of_day else {}
    return [DayPoint(day, c.sha, passed[(c.sha, project.pk)]) for day, c in sorted(newest_of_day.items())]
