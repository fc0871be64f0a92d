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

from django.db import connection
from django.utils import timezone

from relay.models import CountedCommit, Level, ModuleCount, Project
from relay.results.cells import cells_for_commits, registered_backends
from relay.results.variants import job_variants
from relay.stats.runkinds import trunk_commits

from .counts import OUTCOMES
from .paths import PATHS, path_of, rules

WINDOW_DAYS = 90
TREND_DAYS = 7


@dataclass
class OutcomeCounts:
    passed: int = 0
    failed: int = 0
    error: int = 0
    skipped: int = 0
    xfailed: int = 0
    xpassed: int = 0

    @property
    def ran(self) -> int:
        return self.passed + self.failed + self.error + self.xfailed + self.xpassed

    def add(self, other: "OutcomeCounts") -> None:
        # Spelt out: a page adds ~10,000 of them, and a loop over getattr/setattr cost 4× as much.
        self.passed += other.passed
        self.failed += other.failed
        self.error += other.error
        self.skipped += other.skipped
        self.xfailed += other.xfailed
        self.xpassed += other.xpassed


@dataclass(frozen=True)
class CountedOn:
    """A trunk commit a backend has counts on."""

    sha: str
    landed_at: datetime


@dataclass
class PathCell:
    path: str
    counts: OutcomeCounts
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
class EnablementRow:
    project: Project
    commit: CountedOn | None
    reference_commit: CountedOn | None
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
    project_ids: list[int],
    now: datetime,
    days: int = WINDOW_DAYS,
    enough: Callable[[int, list], bool] | None = None,
    until: datetime | None = None,
) -> dict[int, list[CountedOn]]:
    """Per backend, the trunk commits of the window (landed by `until` when given) it has counts
    on (CountedCommit), newest first. With `enough` (a backend and its counted commits so far,
    newest first → whether they will do) the trunk is walked back a page at a time, a backend's
    walk ending once they do, so a page needing a backend's newest reads a day of commits, not 90."""
    window = trunk_commits().filter(landed_at__gte=now - timedelta(days=days)).order_by("-landed_at", "-id")
    window = window.filter(landed_at__lte=until) if until else window
    counted: dict[int, list[CountedOn]] = defaultdict(list)
    walking = set(project_ids)
    for start, stop in _pages(enough is not None):
        page = window[start:stop]
        landed = {sha: (n, at) for n, (sha, at) in enumerate(page.values_list("sha", "landed_at"))}
        pairs = CountedCommit.objects.filter(project_id__in=walking, sha__in=page.values("sha"))
        found: dict[int, list[str]] = defaultdict(list)
        for project_id, sha in pairs.values_list("project_id", "sha"):
            if sha in landed:  # not a commit landed between the two reads
                found[project_id].append(sha)
        for project_id, shas in found.items():
            counted[project_id] += [CountedOn(sha, landed[sha][1]) for sha in sorted(shas, key=lambda s: landed[s][0])]
        walking = {pid for pid in walking if not (enough and enough(pid, counted.get(pid, [])))}
        if not walking or stop is None or len(landed) < stop - start:  # done, or the window ended
            break
    return dict(counted)


def _pages(walk: bool) -> list[tuple[int, int | None]]:
    """(start, stop) of each page of the window, newest first; stop None: to its end."""
    return list(itertools.pairwise([0, *PAGES, None])) if walk else [(0, None)]


def module_counts(
    pairs: list[tuple[str, Project]], outcomes: tuple[str, ...] = OUTCOMES
) -> dict[tuple[str, int], dict[str, OutcomeCounts]]:
    """Per (commit, backend), its counts per module over the attempts that count there; only
    `outcomes` are read, the others left 0 (skip rises read 60 commits for two of them)."""
    keys = sorted({(sha, p.pk) for sha, p in pairs})
    found: dict[tuple[str, int], dict[str, OutcomeCounts]] = {key: {} for key in keys}
    rows = _summed(_jobs_counted(pairs), keys, outcomes)
    for n, module, *values in rows:
        found[keys[n]][module] = OutcomeCounts(**dict(zip(outcomes, values, strict=True)))
    return found


def passed_by_path(pairs: list[tuple[str, Project]], in_force) -> dict[tuple[str, int], dict[str, int]]:
    """Per (commit, backend), the tests passed per path over the attempts that count there
    (module_counts summed by path_of), summed by path in the database: each module the jobs
    counted is named with its path in the query, so a 90-day history reads ~1,000 sums, not
    ~27,000 modules."""
    keys = sorted({(sha, p.pk) for sha, p in pairs})
    found = {key: dict.fromkeys(PATHS, 0) for key in keys}
    jobs = _jobs_counted(pairs)
    named = ModuleCount.objects.filter(job_run_id__in=list(jobs)).values_list("module", flat=True).distinct()
    paths = [(module, path_of(module, in_force)) for module in named]
    for n, path, passed in _summed(jobs, keys, ("passed",), paths):
        found[keys[n]][path] += passed
    return found


def _summed(jobs: dict[int, tuple], keys: list[tuple], outcomes: tuple[str, ...], paths: list | None = None) -> list:
    """(the index in `keys` of a job's pair, module — or its path when `paths` names each
    module's — then each outcome summed over the pair's jobs), one row per group. Raw SQL: the
    jobs (and paths) are given to the database as a VALUES table to group by, so it sums
    tens of thousands of rows by a small integer and Python reads only the sums (grouping by
    the 40-character commit cost twice the reading; Django's row loop, as much again)."""
    if not jobs or paths == []:
        return []
    tables, params = _jobs_table(jobs, keys)
    if paths is not None:
        tables += f", paths (module, path) AS (VALUES {', '.join(['(%s, %s)'] * len(paths))})"
        params += [value for pair in paths for value in pair]
    name = "paths.path" if paths is not None else "c.module"
    sql = (
        f"WITH {tables} SELECT jobs.pair, {name}, "
        + ", ".join(f"SUM(c.{connection.ops.quote_name(outcome)})" for outcome in outcomes)
        + f" FROM {ModuleCount._meta.db_table} c JOIN jobs ON jobs.id = c.job_run_id"
        + (" JOIN paths ON paths.module = c.module" if paths is not None else "")
        + f" GROUP BY jobs.pair, {name}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _jobs_table(jobs: dict[int, tuple], keys: list[tuple]) -> tuple[str, list]:
    """`jobs (id, pair)`: each job with the index of its pair in `keys`, as a VALUES table."""
    index = {key: n for n, key in enumerate(keys)}
    params = [value for job_id, key in jobs.items() for value in (job_id, index[key])]
    return f"jobs (id, pair) AS (VALUES {', '.join(['(%s, %s)'] * len(jobs))})", params


RISES_SQL = """
WITH {jobs},
series AS (
    SELECT jobs.pair AS at, c.module AS module, SUM(c.skipped + c.xfailed) AS n
    FROM {table} c JOIN jobs ON jobs.id = c.job_run_id GROUP BY jobs.pair, c.module
),
steps AS (SELECT at, module, n, LAG(n) OVER (PARTITION BY module ORDER BY at) AS before FROM series),
latest AS (SELECT module, MAX(at) AS at FROM steps WHERE n > before GROUP BY module)
SELECT latest.module, latest.at, newest.n - steps.before
FROM latest
JOIN steps ON steps.module = latest.module AND steps.at = latest.at
JOIN series newest ON newest.module = latest.module AND newest.at = %s
WHERE newest.n > steps.before
"""


def skip_rises_of(pairs: list[tuple[str, Project]]) -> dict[str, tuple[int, int]]:
    """Of one backend's commits, oldest first (`pairs`), each module's skipped + expected
    failures over the attempts that count, per commit where it has counts: for the modules whose
    count on the newest commit stands above the count before its latest rise, (the index in
    `pairs` of the commit of that rise, how many more). The database walks the series (a
    window over ~18,000 sums for 60 commits) and answers only the rising modules."""
    keys = [(sha, p.pk) for sha, p in pairs]
    jobs = _jobs_counted(pairs)
    if not jobs:
        return {}
    tables, params = _jobs_table(jobs, keys)
    with connection.cursor() as cursor:
        cursor.execute(RISES_SQL.format(jobs=tables, table=ModuleCount._meta.db_table), [*params, len(keys) - 1])
        return {module: (at, added) for module, at, added in cursor.fetchall()}


def _jobs_counted(pairs: list[tuple[str, Project]]) -> dict[int, tuple[str, int]]:
    """The attempts that count on each (commit, backend) (relay.results.cells): job id → its pair."""
    shas, projects = sorted({sha for sha, _ in pairs}), list({p.pk: p for _, p in pairs}.values())
    cells = cells_for_commits(shas, projects)
    return {v.job.id: (sha, p.pk) for sha, p in pairs for v in cells[(sha, p.pk)].verdicts}


def variant_counts(sha: str, project: Project) -> dict[str, dict[str, OutcomeCounts]]:
    """Per variant of `project` on `sha`, its counts per module over the attempts that count
    there (as module_counts, split by each job's variant)."""
    jobs = [v.job.id for v in cells_for_commits([sha], [project])[(sha, project.pk)].verdicts]
    variants = job_variants(project, jobs)
    found: dict[str, dict[str, OutcomeCounts]] = {}
    rows = ModuleCount.objects.filter(job_run_id__in=jobs).values_list("job_run_id", "module", *OUTCOMES)
    for job_id, module, *values in rows:
        found.setdefault(variants[job_id], {}).setdefault(module, OutcomeCounts()).add(OutcomeCounts(*values))
    return found


def by_path(modules: dict[str, OutcomeCounts], in_force) -> dict[str, dict[str, OutcomeCounts]]:
    paths: dict[str, dict[str, OutcomeCounts]] = {path: {} for path in PATHS}
    for module, counts in modules.items():
        paths[path_of(module, in_force)][module] = counts
    return paths


def path_cell(path: str, mine: dict[str, OutcomeCounts], theirs: dict[str, OutcomeCounts]) -> PathCell:
    total = OutcomeCounts()
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
    rows: list[EnablementRow]


def enablement_table(now: datetime | None = None) -> Table:
    """Backends × paths, the reference's row first (enablement_backends' order)."""
    now = now or timezone.now()
    projects = enablement_backends()
    counted = counted_commits([p.pk for p in projects], now, enough=lambda _, found: bool(found))
    older = _weeks_before(counted, now)
    reference = next((p for p in projects if p.is_reference), None)
    plan = {p.pk: _commits_read(counted.get(p.pk, []), older.get(p.pk), reference, counted) for p in projects}
    pairs = {pair for p in projects for pair in _pairs(p, plan[p.pk], reference)}
    counts = module_counts(sorted(pairs, key=lambda pair: (pair[0], pair[1].pk))) if pairs else {}
    in_force = rules()
    week_back = [(plan[p.pk][2].sha, p) for p in projects if plan[p.pk][2]]
    before = passed_by_path(week_back, in_force) if week_back else {}
    return Table(PATHS, [_row(p, plan[p.pk], reference, counts, before, in_force) for p in projects])


def _weeks_before(counted: dict[int, list[CountedOn]], now: datetime) -> dict[int, CountedOn]:
    """Per backend with a newest counted commit, its newest counted commit at least TREND_DAYS
    older (its trend's): one walk back from the latest of those bounds, not through the week."""
    bounds = {pid: rows[0].landed_at - timedelta(days=TREND_DAYS) for pid, rows in counted.items() if rows}
    if not bounds:
        return {}

    def reached(pid: int, found: list[CountedOn]) -> bool:
        return any(c.landed_at <= bounds[pid] for c in found)

    before = counted_commits(list(bounds), now, enough=reached, until=max(bounds.values()))
    return {
        pid: next(c for c in rows if c.landed_at <= bounds[pid]) for pid, rows in before.items() if reached(pid, rows)
    }


def _commits_read(
    mine: list[CountedOn], older: CountedOn | None, reference: Project | None, counted: dict
) -> list[CountedOn | None]:
    """(the backend's newest counted commit, the reference's to compare it with, the one its
    trend compares with), each None when there is none."""
    if not mine:
        return [None, None, None]
    theirs = counted.get(reference.pk, []) if reference else []
    return [mine[0], reference_commit(mine[0], reference, theirs), older]


def reference_commit(newest: CountedOn, reference: Project | None, theirs: list[CountedOn]) -> CountedOn | None:
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
    """The (commit, backend) pairs a row reads module by module: its newest, the reference's."""
    newest, ref_commit, _ = plan
    mine = [(newest.sha, project)] if newest else []
    return mine + ([(ref_commit.sha, reference)] if ref_commit and reference else [])


def _row(
    project: Project, plan: list, reference: Project | None, counts: dict, before: dict, in_force
) -> EnablementRow:
    """`before`: per (commit, backend) a week back, the tests passed per path (the trend's)."""
    newest, ref_commit, older = plan
    row = EnablementRow(project, newest, ref_commit)
    if newest is None:
        return row
    mine = by_path(counts[(newest.sha, project.pk)], in_force)
    theirs = by_path(counts[(ref_commit.sha, reference.pk)], in_force) if ref_commit and reference else {}
    for path in PATHS:
        cell = path_cell(path, mine[path], theirs.get(path, {}))
        if older is not None:
            cell.trend = cell.counts.passed - before[(older.sha, project.pk)][path]
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
