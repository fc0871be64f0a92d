"""The grid (upstream commits × backends), its filters and cell tooltips, and the PR page (one row
per head SHA). Cells come from relay.results.cells under the status policy; baseline marks and
upstream-broken rows from relay.results.baseline, for the whole page at once."""

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

from django.conf import settings

from relay.inputs.params import int_param
from relay.models import HardwareKind, Level, Project, PullRequest, UpstreamCommit
from relay.policy.verdicts import FAILING, STATES, Counts, JobVerdict, State, job_key_label, job_label
from relay.results.baseline import MARK_LABELS, MARK_SHORT, SHARED, failures_load, grid_baseline
from relay.results.bisections import probes_on_commit, probes_reading, probes_said
from relay.results.blame import BackendBlame, reference_broken_by
from relay.results.cells import (
    Cell,
    CellKey,
    cells_for_commits,
    reference_backend,
    registered_backends,
)
from relay.results.culprits import Streak, streaks
from relay.results.grid import CommitCells, commit_cells
from relay.results.pr import PrHead, pr_facts
from relay.results.status import StateShown
from relay.results.triage import annotate_failures
from relay.results.variants import cell_variants, failing_alone
from relay.stats.runkinds import pr_heads, trunk_commits

from .patterns import FilterError, PatternError, pattern_matcher
from .selectors_commit import commit_pr_number, variant_only_marks
from .selectors_tests import failed_test_dicts_states

PER_PAGE = 50
MAX_FILTER_CHARS = 200
LEVELS = ("L4", "L3", "L2", "L1")
GROUP_LABELS = {
    "ref": "Reference (OpenReg baseline)",
    "L4": "L4 · merge-gating",
    "L3": "L3 · check runs on labelled PRs",
    "L2": "L2 · results on the HUD",
    "L1": "L1 · dispatch only (no results)",
}
GROUP_SHORTER = {
    "ref": ("reference", "ref"),
    "L4": ("L4 · gating", "L4"),
    "L3": ("L3 · checks", "L3"),
    "L2": ("L2 · results", "L2"),
    "L1": ("L1 · dispatch", "L1"),
}
GROUP_CHARS_PER_COLUMN = 4
"""About how many characters of the group row fit over one 24 px column."""
TOOLTIP_FAILED_TESTS = 10


# --- filters ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GridFilters:
    """Everything the grid's URL can say; defaults are left out of links."""

    levels: tuple[str, ...] = ()
    device: str = ""
    hardware: str = ""
    name: str = ""
    regex: bool = False
    hide_green: bool = False
    failures_only: bool = False
    heads: str = "trunk"
    page: int = 1
    expand: tuple[str, ...] = ()

    @classmethod
    def from_query(cls, query) -> "GridFilters":
        hardware = query.get("hw", "")
        return cls(
            levels=tuple(level for level in LEVELS if level in query.getlist("level")),
            device=query.get("device", "")[:60],
            hardware=hardware if hardware in HardwareKind.values else "",
            name=query.get("name", "")[:MAX_FILTER_CHARS],
            regex=query.get("regex") == "1",
            hide_green=query.get("hide_green") == "1",
            failures_only=query.get("failures") == "1",
            heads="pr" if query.get("heads") == "pr" else "trunk",
            page=_positive_int(query.get("page")),
            expand=tuple(dict.fromkeys(name.lower() for name in query.getlist("expand") if name)),
        )

    def query(self, **changes) -> str:
        """This view's query string with some state changed (and the page reset unless given)."""
        state = replace(self, **({"page": 1} | changes))
        pairs = [("level", level) for level in state.levels]
        pairs += [(k, v) for k, v in (("device", state.device), ("hw", state.hardware), ("name", state.name)) if v]
        pairs += [
            (k, "1")
            for k, on in (("regex", state.regex), ("hide_green", state.hide_green), ("failures", state.failures_only))
            if on
        ]
        pairs += [("heads", "pr")] if state.heads == "pr" else []
        pairs += [("page", str(state.page))] if state.page > 1 else []
        pairs += [("expand", name) for name in state.expand]
        return urlencode(pairs)

    def toggled_expand(self, full_name: str) -> tuple[str, ...]:
        name = full_name.lower()
        return tuple(n for n in self.expand if n != name) if name in self.expand else self.expand + (name,)


def _positive_int(value) -> int:
    return min(int_param(value, default=1, low=1), 10_000)


def name_matcher(filters: GridFilters):
    """A predicate over names, or None for no filter. Raises FilterError for a bad regex."""
    if not filters.name:
        return None
    if not filters.regex:
        needle = filters.name.lower()
        return lambda text: needle in text.lower()
    try:
        return pattern_matcher(filters.name)
    except PatternError as exc:
        raise FilterError(f"Invalid regular expression {filters.name!r}: {exc}. Showing every backend.") from exc


# --- columns ------------------------------------------------------------------------------------


@dataclass
class GridColumn:
    project: Project
    job: tuple[str, str] | None = None
    expanded: bool = False
    toggle_query: str = ""

    @property
    def label(self) -> str:
        return job_key_label(self.job) if self.job else self.project.label

    @property
    def group(self) -> str:
        return "ref" if self.project.is_reference else self.project.level


@dataclass
class ColumnGroup:
    key: str
    label: str
    span: int

    @property
    def short(self) -> str:
        """The longest label that fits over the group's columns; the full one is the tooltip."""
        room = self.span * GROUP_CHARS_PER_COLUMN
        candidates = (self.label, *GROUP_SHORTER.get(self.key, ()))
        return next((text for text in candidates if len(text) <= room), candidates[-1])


def backend_options(projects: list[Project]) -> dict:
    return {
        "levels": LEVELS,
        "devices": sorted({p.device for p in projects if p.device}),
        "hardware": [
            (value, label) for value, label in HardwareKind.choices if any(p.hardware_kind == value for p in projects)
        ],
    }


def backends_for_filters(projects: list[Project], filters: GridFilters) -> list[Project]:
    """Level, device and hardware filters; the reference stays pinned as the baseline."""

    def keep(p: Project) -> bool:
        return (
            (not filters.levels or p.level in filters.levels)
            and (not filters.device or p.device == filters.device)
            and (not filters.hardware or p.hardware_kind == filters.hardware)
        )

    return [p for p in projects if p.is_reference or keep(p)]


def _job_keys(project: Project, cells: dict[CellKey, Cell], shas: list[str]) -> list[tuple[str, str]]:
    keys = {(v.job.workflow_name, v.job.job_name) for sha in shas for v in cells[(sha, project.id)].verdicts}
    return sorted(keys)


def _columns_for(project, cells, shas, filters: GridFilters, matches) -> list[GridColumn]:
    """The backend's column, then its job columns when expanded. With a name filter a backend
    stays when its own name or any of its jobs' names matches (as the HUD keeps groups)."""
    own_match = matches is None or matches(project.full_name) or matches(project.label)
    expanded = project.full_name.lower() in filters.expand
    keys = _job_keys(project, cells, shas) if expanded or not own_match else []
    matching_keys = keys if own_match else [k for k in keys if matches(job_key_label(k))]
    if not (own_match or matching_keys or project.is_reference):
        return []
    column = GridColumn(
        project,
        expanded=expanded,
        toggle_query=filters.query(expand=filters.toggled_expand(project.full_name), page=filters.page),
    )
    return [column] + ([GridColumn(project, job=k) for k in matching_keys] if expanded else [])


# --- rows ---------------------------------------------------------------------------------------


@dataclass
class GridCell(StateShown):
    sha: str
    project_id: int
    state: State
    mark: str | None = None
    job: tuple[str, str] | None = None
    probe: str = ""
    """Where no counted run tested the backend: its bisection probes' reading there (fail or pass,
    relay.results.bisections.probes_reading), said in full by `probes_said`."""
    probes_said: str = ""
    variant_only: str = ""
    """The hardware variant alone failing here (relay.results.variants), "" otherwise."""

    @property
    def failing(self) -> bool:
        return self.state in FAILING

    @property
    def mark_label(self) -> str:
        return MARK_LABELS.get(self.mark or "", "")


@dataclass
class GridRow:
    commit: UpstreamCommit
    cells: list[GridCell]
    upstream_broken: bool = False

    @property
    def pr_number(self) -> int | None:
        return commit_pr_number(self.commit)

    @property
    def failing(self) -> bool:
        return any(cell.failing for cell in self.cells)


def _grid_cell(shown: CommitCells, sha: str, column: GridColumn) -> GridCell:
    pid = column.project.id
    if column.job is None:
        probes = shown.probes_only(sha, pid)
        return GridCell(
            sha,
            pid,
            shown.state(sha, pid),
            shown.mark(sha, pid),
            probe=probes_reading(probes),
            probes_said=probes_said(probes),
            variant_only=shown.variant_only(sha, pid),
        )
    return GridCell(sha, pid, shown.state(sha, pid, column.job), job=column.job)


# --- the grid -----------------------------------------------------------------------------------


@dataclass
class Grid:
    filters: GridFilters
    columns: list[GridColumn]
    rows: list[GridRow]
    commits_on_page: int
    name_error: str = ""
    has_next: bool = False
    options: dict = field(default_factory=dict)
    backends_total: int = 0

    @property
    def groups(self) -> list[ColumnGroup]:
        return column_groups(self.columns)

    @property
    def empty_reason(self) -> str:
        if not self.commits_on_page:
            return "no_commits"
        return "no_rows" if not self.rows else ""


def commits_page(heads: str, page: int) -> tuple[list[UpstreamCommit], bool]:
    """Trunk pushes (or PR heads), newest first, one page plus one row to know if more follow."""
    commits = trunk_commits() if heads == "trunk" else pr_heads()
    start = (page - 1) * PER_PAGE
    rows = list(commits.order_by("-landed_at", "-id")[start : start + PER_PAGE + 1])
    return rows[:PER_PAGE], len(rows) > PER_PAGE


def grid_page(filters: GridFilters) -> Grid:
    commits, has_next = commits_page(filters.heads, filters.page)
    everything = registered_backends()
    grid = grid_for_commits(commits, backends_for_filters(everything, filters), filters)
    return replace(grid, has_next=has_next, options=backend_options(everything), backends_total=len(everything))


def grid_for_commits(commits: list[UpstreamCommit], projects: list[Project], filters: GridFilters) -> Grid:
    """Rows for the commits, columns for the backends that survive the filters: five queries
    (jobs, dispatches, failing attempts' tests, running jobs' start times, bisection probes)
    whatever the page's size."""
    shas = [c.sha for c in commits]
    shown = commit_cells(shas, projects)
    matches, name_error = _matcher_or_error(filters)
    columns = [col for p in projects for col in _columns_for(p, shown.cells, shas, filters, matches)]
    rows = [GridRow(c, [_grid_cell(shown, c.sha, col) for col in columns], c.sha in shown.broken) for c in commits]
    columns, rows = _hide_green(columns, rows) if filters.hide_green else (columns, rows)
    if filters.failures_only:
        rows = [r for r in rows if r.failing]
    return Grid(filters, columns, rows, commits_on_page=len(commits), name_error=name_error)


def _matcher_or_error(filters: GridFilters):
    """A bad regex shows every backend with a message, never a 500."""
    try:
        return name_matcher(filters), ""
    except FilterError as exc:
        return None, str(exc)


def _hide_green(columns: list[GridColumn], rows: list[GridRow]) -> tuple[list[GridColumn], list[GridRow]]:
    """Drop columns with no failure anywhere on the page, as the HUD does; the reference stays."""
    keep = [
        i
        for i, col in enumerate(columns)
        if (col.project.is_reference and col.job is None) or any(r.cells[i].failing for r in rows)
    ]
    for row in rows:
        row.cells = [row.cells[i] for i in keep]
    return [columns[i] for i in keep], rows


def column_groups(columns: list[GridColumn]) -> list[ColumnGroup]:
    groups: list[ColumnGroup] = []
    for column in columns:
        if groups and groups[-1].key == column.group:
            groups[-1].span += 1
        else:
            groups.append(ColumnGroup(column.group, GROUP_LABELS.get(column.group, column.group), 1))
    return groups


# --- tooltip ------------------------------------------------------------------------------------


@dataclass
class TooltipJob:
    verdict: JobVerdict
    attempts: list
    failed: list[dict]
    failed_more: int
    variant: str = ""


@dataclass
class CellTooltip:
    cell: Cell
    commit: UpstreamCommit | None
    mark: str | None
    failed_tests: dict[int, list]
    upstream_broken: bool = False
    streaks: list[Streak] = field(default_factory=list)
    """Since which commit each failing job and test of the cell fails (trunk commits only)."""
    probes: list = field(default_factory=list)
    """Where no counted run tested the backend: the bisection probes run there (as on its cell)."""
    variants: dict[int, str] = field(default_factory=dict)
    """Each job's hardware variant (relay.results.variants), when its backend declares them."""

    @property
    def variant_only(self) -> str:
        """The variant alone failing here, as the grid's cell and the commit page say it."""
        return failing_alone(self.cell, self.variants)

    @property
    def window(self) -> int:
        return settings.CRCR_CULPRIT_WINDOW

    @property
    def mark_label(self) -> str:
        return MARK_LABELS.get(self.mark or "", "")

    @property
    def pr_number(self) -> int | None:
        """The PR the commit is the head of, or that landed it: what "(this PR)" compares with."""
        return commit_pr_number(self.commit)

    @property
    def jobs(self) -> list[TooltipJob]:
        """Each job with its attempts and the first few failed tests (the commit page has all)."""
        jobs = []
        for verdict in self.cell.verdicts:
            failed = self.failed_tests.get(verdict.job.id, [])
            jobs.append(
                TooltipJob(
                    verdict,
                    self.cell.attempts_of(verdict),
                    failed[:TOOLTIP_FAILED_TESTS],
                    max(0, len(failed) - TOOLTIP_FAILED_TESTS),
                    self.variants.get(verdict.job.id, ""),
                )
            )
        return jobs


def parse_cell_key(value: str) -> tuple[str, int] | None:
    sha, _, project_id = (value or "").partition(".")
    number = int_param(project_id)
    if not re.fullmatch(r"[0-9a-fA-F]{7,40}", sha, re.ASCII) or number is None:
        return None
    return sha.lower(), number


def cell_tooltip(sha: str, project_id: int) -> CellTooltip | None:
    """One cell in full: every job with its attempts and failed tests, and its baseline mark."""
    projects = registered_backends()
    project = next((p for p in projects if p.id == project_id), None)
    if project is None:
        return None
    reference = reference_backend(projects)
    pair = [project] + ([reference] if reference and reference is not project else [])
    cells = cells_for_commits([sha], pair, detail=True)
    marks, broken = grid_baseline(cells, reference.id if reference else None)
    failures = failures_load(cells, with_messages=True)
    tests = failures[(sha, project_id)].tests_of
    against = failures[(sha, reference.id)] if reference and reference is not project else None
    commit = UpstreamCommit.objects.filter(sha=sha).first()
    cell = cells[(sha, project_id)]
    since = streaks(project, start=commit) if cell.failing and commit is not None and commit.is_trunk else []
    if cell.failing and not project.is_reference:
        annotate_failures(cell, tests)
    for job_tests in tests.values():
        failed_test_dicts_states(project, job_tests, against)
    variants = cell_variants([cell])
    variant_only_marks(cell, tests, variants)
    probes = probes_on_commit(sha).get(project_id, []) if cell.state == State.NO_RESULT else []
    return CellTooltip(cell, commit, marks.get((sha, project_id)), tests, sha in broken, since, probes, variants)


def cell_log_job(sha: str, project_id: int, job: str = ""):
    """The job whose log a double-clicked cell opens, with its backend's CI provider (which hosts
    may be redirected to): the named job (an expanded job column), else the cell's worst job
    (verdicts come worst first), i.e. the failure to read when there is one. (None, "") if none."""
    project = next((p for p in registered_backends() if p.id == project_id), None)
    if project is None:
        return None, ""
    verdicts = cells_for_commits([sha], [project], detail=True)[(sha, project_id)].verdicts
    named = [v for v in verdicts if not job or job_label(v.job) == job]
    return (named[0].job if named else None), project.ci_provider


# --- the PR page --------------------------------------------------------------------------------


@dataclass
class PrPage:
    number: int
    heads: list[PrHead]
    columns: list[GridColumn]
    groups: list[ColumnGroup]
    summary: str
    gate: dict | None
    title: str
    info: PullRequest | None = None
    """Author, base and state, as the newest pull_request webhook told them."""
    labels: list[str] = field(default_factory=list)
    blame: list[BackendBlame] = field(default_factory=list)
    """Each backend failing on the latest head: already failing on trunk, new, or backend-only."""
    l3_labelled: list[Project] = field(default_factory=list)
    """L3 backends whose `ciflow/crcr/<device>` label the PR carries."""
    landed: UpstreamCommit | None = None
    """The trunk commit the PR landed as, with its grid row and summary: a landed PR's answer."""
    landed_row: GridRow | None = None
    landed_summary: str = ""


def pr_page(number: int) -> PrPage:
    """The PR's facts, gate and blame (relay.results.pr), its heads × backends, and the trunk
    commit it landed as (its row last)."""
    projects = registered_backends()
    facts = pr_facts(number, projects)
    heads, landed = facts.heads, facts.landed
    commits = [h.commit or UpstreamCommit(sha=h.sha, pr_number=number, landed_at=h.first_seen) for h in heads]
    grid = grid_for_commits(commits + ([landed] if landed else []), projects, GridFilters())
    for head, row in zip(heads, grid.rows):
        head.row = row
    landed_row = grid.rows[len(heads)] if landed else None
    landed_summary = head_summary(landed_row, grid.columns) if landed_row else ""
    found = {"landed": landed, "landed_row": landed_row, "landed_summary": landed_summary}
    if not heads:
        return PrPage(number, [], grid.columns, grid.groups, "", None, facts.title, **found)
    broke_reference = reference_broken_by(facts.blame)
    if broke_reference:  # the PR broke the reference: not upstream's breakage (relay.results.blame)
        heads[0].row.upstream_broken = False
    summary = head_summary(heads[0].row, grid.columns, facts.gate, broke_reference)
    return PrPage(
        number,
        heads,
        grid.columns,
        grid.groups,
        summary,
        facts.gate,
        facts.title,
        facts.info,
        facts.labels,
        facts.blame,
        facts.l3_labelled,
        **found,
    )


def head_summary(
    row: GridRow, columns: list[GridColumn], gate: dict | None = None, broke_reference: bool = False
) -> str:
    """ "5/7 backends passed, 1 running, 1 failing (backend-specific)" over the backends that
    report results and have something for this head; with none, whether the gate still judges
    something (the relay's health probe, which has no column). When the PR broke the reference
    itself (`broke_reference`), what a backend shares with it is the PR's, not upstream's."""
    cells = [
        c
        for c, col in zip(row.cells, columns)
        if col.job is None and col.project.level != Level.L1 and c.state != State.NO_RESULT
    ]
    counts = [STATES[c.state].counts for c in cells]
    passed = counts.count(Counts.PASS)
    running = sum(1 for c in cells if STATES[c.state].counts == Counts.PENDING or c.state == State.DISPATCH_PENDING)
    failing = [c for c in cells if c.failing]
    parts = [f"{passed}/{len(cells)} backends passed"]
    if running:
        parts.append(f"{running} running")
    if failing:
        parts.append(f"{len(failing)} failing ({_failing_kinds(failing, broke_reference)})")
    if cells:
        return ", ".join(parts)
    judged = [b["project"] for b in (gate or {}).get("backends", [])]
    if judged:
        return f"No backend has results for this head yet; the gate below judges {', '.join(judged)}"
    return "No backend has results for this head yet"


FAILING_KIND_WORDS = {**MARK_SHORT, None: "the reference"}
"""Every baseline mark's short words (relay.results.baseline.MARK_SHORT, so a new mark can never
miss here); a failing cell without a mark is the reference's own."""


SHARED_BY_PR = "shared with the reference, which this PR broke"


def _failing_kinds(failing: list[GridCell], broke_reference: bool = False) -> str:
    """ "backend-specific", or "1 shared with reference, 2 backend-specific" when they differ."""
    words = {**FAILING_KIND_WORDS, SHARED: SHARED_BY_PR} if broke_reference else FAILING_KIND_WORDS
    tally = Counter(words[cell.mark] for cell in failing)
    if len(tally) == 1:
        return next(iter(tally))
    return ", ".join(f"{n} {kind}" for kind, n in tally.items())
