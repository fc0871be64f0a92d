"""Reading enablement: backends × integration paths on trunk, against the OpenReg reference.

A backend's counts on a commit are its ModuleCount rows summed over the attempts that count
there (the latest attempt of each job: relay.results.cells, the one status policy), so a re-run
replaces its first try here as everywhere. Each backend is read on its newest trunk commit with
counts; the reference on the same commit when it has counts there, else on its newest.

Per path: *passed* of *ran* (every test that was not skipped: failed, error, expected failures
and unexpected successes ran too); *parity*, of the tests the reference passes in the path the
share the backend passes, from counts: per module the smaller of the two passed counts, summed,
over the reference's passed (a backend passing more of a module than the reference counts as
the reference's number, so parity never passes 100 %); *trend*, passed now less passed on the
newest counted trunk commit at least TREND_DAYS older."""

import itertools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Sum
from django.utils import timezone

from relay.models import CountedCommit, Level, ModuleCount, Project
from relay.results.cells import cells_for_commits, registered_backends
from relay.results.variants import job_variants
from relay.runkinds import trunk_commits

from .counts import OUTCOMES
from .paths import PATHS, path_of, rules

WINDOW_DAYS = 90
TREND_DAYS = 7


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0
    xfailed: int = 0
    xpassed: int = 0

    @property
    def ran(self) -> int:
        return self.passed + self.failed + self.error + self.xfailed + self.xpassed

    def add(self, other: "Counts") -> None:
        for outcome in OUTCOMES:
            setattr(self, outcome, getattr(self, outcome) + getattr(other, outcome))


@dataclass(frozen=True)
class Counted:
    """A trunk commit a backend has counts on."""

    sha: str
    landed_at: datetime


@dataclass
class PathCell:
    path: str
    counts: Counts
    reference_passed: int
    matched: int
    """Summed per module: the smaller of the backend's and the reference's passed counts."""
    trend: int | None = None

    @property
    def parity(self) -> float | None:
        return self.matched / self.reference_passed if self.reference_passed else None


@dataclass
class VariantRow:
    """One hardware variant of a backend (relay.results.variants) on the backend's commit."""

    variant: str
    cells: list[PathCell]


@dataclass
class BackendRow:
    project: Project
    commit: Counted | None
    reference_commit: Counted | None
    cells: list[PathCell] = field(default_factory=list)
    variants: list[VariantRow] = field(default_factory=list)
    """Per variant, when the backend declares variant keys and its jobs sent them."""

    @property
    def is_reference(self) -> bool:
        return self.project.is_reference


# --- reads ---------------------------------------------------------------------------------------


PAGES = (50, 500)
"""Where a walk with an end in sight pauses, in trunk commits newest first: after a day's, after
ten days', then the rest. A backend reporting counts is found on its newest in the first."""


def counted_commits(
    project_ids: list[int], now: datetime, days: int = WINDOW_DAYS, enough: Callable[[list], bool] | None = None
) -> dict[int, list[Counted]]:
    """Per backend, the trunk commits of the window it has counts on (CountedCommit), newest
    first. With `enough` (a backend's counted commits so far, newest first → whether they will
    do) the trunk is walked back a page at a time, a backend's walk ending once they do, so a
    page needing a backend's newest reads a day of commits, not 90."""
    window = trunk_commits().filter(landed_at__gte=now - timedelta(days=days)).order_by("-landed_at", "-id")
    trunk = list(window.values_list("sha", "landed_at"))
    order = {sha: (n, landed) for n, (sha, landed) in enumerate(trunk)}
    counted: dict[int, list[Counted]] = defaultdict(list)
    walking = set(project_ids)
    for start, stop in _pages(len(trunk), enough is not None):
        page = window.values("sha")[start:stop] if enough else window.values("sha")
        pairs = CountedCommit.objects.filter(project_id__in=walking, sha__in=page).values_list("project_id", "sha")
        found: dict[int, list[str]] = defaultdict(list)
        for project_id, sha in pairs:
            if sha in order:  # not a commit landed since the list was read
                found[project_id].append(sha)
        for project_id, shas in found.items():
            counted[project_id] += [Counted(sha, order[sha][1]) for sha in sorted(shas, key=lambda s: order[s][0])]
        walking = {pid for pid in walking if not (enough and enough(counted.get(pid, [])))}
        if not walking:
            break
    return dict(counted)


def _pages(count: int, walk: bool) -> list[tuple[int, int]]:
    if not walk:
        return [(0, count)] if count else []
    return list(itertools.pairwise(sorted({0, *(min(bound, count) for bound in PAGES), count})))


def module_counts(
    pairs: list[tuple[str, Project]], outcomes: tuple[str, ...] = OUTCOMES
) -> dict[tuple[str, int], dict[str, Counts]]:
    """Per (commit, backend), its counts per module over the attempts that count there, summed
    in the database (a row's sha and project are its job's); only `outcomes` are read, the
    others left 0 (a history of 90 commits asks for what it plots)."""
    shas, projects = sorted({sha for sha, _ in pairs}), list({p.pk: p for _, p in pairs}.values())
    cells = cells_for_commits(shas, projects)
    jobs = [v.job.id for sha, p in pairs for v in cells[(sha, p.pk)].verdicts]
    found: dict[tuple[str, int], dict[str, Counts]] = {key: {} for key in {(s, p.pk) for s, p in pairs}}
    sums = {f"sum_{outcome}": Sum(outcome) for outcome in outcomes}
    rows = (
        ModuleCount.objects.filter(job_run_id__in=jobs)
        .values("sha", "project_id", "module")
        .annotate(**sums)
        .values_list("sha", "project_id", "module", *sums)
    )
    for sha, project_id, module, *values in rows:
        found[(sha, project_id)][module] = Counts(**dict(zip(outcomes, values, strict=True)))
    return found


def variant_counts(sha: str, project: Project) -> dict[str, dict[str, Counts]]:
    """Per variant of `project` on `sha`, its counts per module over the attempts that count
    there (as module_counts, split by each job's variant)."""
    jobs = [v.job.id for v in cells_for_commits([sha], [project])[(sha, project.pk)].verdicts]
    variants = job_variants(project, jobs)
    found: dict[str, dict[str, Counts]] = {}
    rows = ModuleCount.objects.filter(job_run_id__in=jobs).values_list("job_run_id", "module", *OUTCOMES)
    for job_id, module, *values in rows:
        found.setdefault(variants[job_id], {}).setdefault(module, Counts()).add(Counts(*values))
    return found


def by_path(modules: dict[str, Counts], in_force) -> dict[str, dict[str, Counts]]:
    paths: dict[str, dict[str, Counts]] = {path: {} for path in PATHS}
    for module, counts in modules.items():
        paths[path_of(module, in_force)][module] = counts
    return paths


def path_cell(path: str, mine: dict[str, Counts], theirs: dict[str, Counts]) -> PathCell:
    total = Counts()
    for counts in mine.values():
        total.add(counts)
    matched = sum(min(counts.passed, mine[m].passed if m in mine else 0) for m, counts in theirs.items())
    return PathCell(path, total, sum(c.passed for c in theirs.values()), matched)


def enablement_backends() -> list[Project]:
    """The backends that report results (L2 and up), the reference first."""
    return [p for p in registered_backends() if p.level != Level.L1 or p.is_reference]


# --- the table -------------------------------------------------------------------------------------


@dataclass
class Table:
    paths: tuple[str, ...]
    rows: list[BackendRow]


def enablement_table(now: datetime | None = None) -> Table:
    """Backends × paths, the reference's row first (enablement_backends' order)."""
    now = now or timezone.now()
    projects = enablement_backends()
    counted = counted_commits([p.pk for p in projects], now, enough=_week_back)
    reference = next((p for p in projects if p.is_reference), None)
    plan = {p.pk: _commits_read(counted.get(p.pk, []), reference, counted) for p in projects}
    pairs = {pair for p in projects for pair in _pairs(p, plan[p.pk], reference)}
    counts = module_counts(sorted(pairs, key=lambda pair: (pair[0], pair[1].pk))) if pairs else {}
    in_force = rules()
    return Table(PATHS, [_row(p, plan[p.pk], reference, counts, in_force) for p in projects])


def _week_back(mine: list[Counted]) -> bool:
    """Whether a backend's counted commits so far reach its trend's: TREND_DAYS before its newest."""
    return bool(mine) and mine[-1].landed_at <= mine[0].landed_at - timedelta(days=TREND_DAYS)


def _commits_read(mine: list[Counted], reference: Project | None, counted: dict) -> list[Counted | None]:
    """(the backend's newest counted commit, the reference's to compare it with, the one its
    trend compares with), each None when there is none."""
    if not mine:
        return [None, None, None]
    newest = mine[0]
    older = next((c for c in mine if c.landed_at <= newest.landed_at - timedelta(days=TREND_DAYS)), None)
    theirs = counted.get(reference.pk, []) if reference else []
    return [newest, reference_commit(newest, reference, theirs), older]


def reference_commit(newest: Counted, reference: Project | None, theirs: list[Counted]) -> Counted | None:
    """The reference's counted commit to read a backend's `newest` beside: the same commit when
    the reference has counts there (`theirs`, its newest counted commits as far as they were
    read, else asked), else the reference's newest."""
    if reference is None:
        return None
    same = next((c for c in theirs if c.sha == newest.sha), None)
    if same is None and CountedCommit.objects.filter(project=reference, sha=newest.sha).exists():
        same = newest
    return same or (theirs[0] if theirs else None)


def _pairs(project: Project, plan: list, reference: Project | None) -> list[tuple[str, Project]]:
    newest, ref_commit, older = plan
    mine = [(c.sha, project) for c in (newest, older) if c]
    return mine + ([(ref_commit.sha, reference)] if ref_commit and reference else [])


def _row(project: Project, plan: list, reference: Project | None, counts: dict, in_force) -> BackendRow:
    newest, ref_commit, older = plan
    row = BackendRow(project, newest, ref_commit)
    if newest is None:
        return row
    mine = by_path(counts[(newest.sha, project.pk)], in_force)
    theirs = by_path(counts[(ref_commit.sha, reference.pk)], in_force) if ref_commit and reference else {}
    before = by_path(counts[(older.sha, project.pk)], in_force) if older else None
    for path in PATHS:
        cell = path_cell(path, mine[path], theirs.get(path, {}))
        if before is not None:
            cell.trend = cell.counts.passed - sum(c.passed for c in before[path].values())
        row.cells.append(cell)
    if project.variant_keys:
        row.variants = _variant_rows(project, newest.sha, theirs, in_force)
    return row


def _variant_rows(project: Project, sha: str, theirs: dict, in_force) -> list[VariantRow]:
    """Each variant's cells against the reference (no trend: a variant's history is not read);
    none when every job is of one unnamed variant."""
    counts = variant_counts(sha, project)
    if set(counts) <= {""}:
        return []
    rows = []
    for variant, modules in sorted(counts.items()):
        mine = by_path(modules, in_force)
        rows.append(VariantRow(variant, [path_cell(path, mine[path], theirs.get(path, {})) for path in PATHS]))
    return rows
