"""The baseline comparison: each backend's failures on a commit against the OpenReg reference's.

For backend b on commit C, each failing test of b (latest attempts only, identities from
relay.policy.testids, a missing module filled in from the commit's other reports) is

* **shared**: the reference failed it too on C, so it is likely an upstream problem;
* **backend only**: the reference ran it and passed, a backend regression. "Ran it" can only be
  inferred: the reference reports failed tests plus counts, so a test the reference did not fail
  counts as passed when the reference reported per-test results (tests_total) and finished;
* **not comparable**: otherwise (reference still running, or no per-test data: "job-level only").

Tests the reference fails but b passed (b reported per-test results) are **reference only**.
Each test also says whether it is **new vs parent** (C's first parent) for b and for the
reference. Backend-only tests that b classifies (hw_classification) as GENERIC or ACCELERATOR
come first: a device-agnostic or accelerator test that fails only on b is the strongest
regression signal.

A failing job that reported no failed test compares at job level: shared when the reference's
build failed too, backend-specific when the reference has a result. That includes a report of
errors alone (pytest's collection error: the backend's extension no longer imports), the break
upstream API changes cause most. **Infrastructure** is only the CI failing to run the job: it
timed out, never started or was cancelled, and sent no report (`infrastructure_failure`). The reference's build or tests failing (its latest attempt concluded `failure`) marks the
commit **upstream-broken**. A reference job that timed out, never started or was cancelled says
nothing about upstream (relay.policy.verdicts, rule 8): like no reference result at all, it means
"no baseline", never a guess."""

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace

from relay.models import Level, UpstreamCommit
from relay.policy.testids import TestId, TestIdResolver, TestTable, report_ids
from relay.policy.verdicts import FAILING, NO_BASELINE_STATES, State, job_label
from relay.triage.classify import triager_load
from relay.triage.mutes import Mutes

from .cells import (
    Cell,
    CellKey,
    cells_for_commits,
    failed_tests_for_jobs,
    latest_failing_job_ids,
    reference_backend,
    registered_backends,
    reported_environment,
)
from .triage import (
    EXPECTED_MARK,
    KNOWN_MARK,
    CellTriage,
    cells_triage,
    mark_known_url,
    needs_messages,
    open_remainder,
    reference_triage,
)
from .variants import cell_variants, cells_failing_alone, failing_alone, tests_failing_alone

SHARED, BACKEND, MIXED, NO_BASELINE, INFRA = "shared", "backend", "mixed", "no_baseline", "infra"
KNOWN, EXPECTED = KNOWN_MARK, EXPECTED_MARK
MARK_LABELS = {
    SHARED: "shared with reference — the reference fails it too",
    BACKEND: "backend-specific — the reference passed",
    MIXED: "mixed — some failures shared with the reference, some not",
    NO_BASELINE: "no baseline — no reference result on this commit",
    INFRA: "infrastructure — the CI did not run the job to a report (timed out, never started or cancelled)",
    KNOWN: "known — every failure matches an open known issue",
    EXPECTED: "expected — the backend lists every failure as an expected failure or intermittent",
}
MARK_SHORT = {
    SHARED: "shared (upstream)",
    BACKEND: "backend-specific",
    MIXED: "mixed",
    NO_BASELINE: "no baseline",
    INFRA: "infrastructure",
    KNOWN: "known issue",
    EXPECTED: "expected",
}
MARK_GLYPHS = {SHARED: "=", BACKEND: "≠", MIXED: "±", NO_BASELINE: "∗", INFRA: "!", KNOWN: "K", EXPECTED: "E"}
"""The second mark on a failing cell, in text so that colour is never the only signal."""
RANKED_FIRST = {"GENERIC", "ACCELERATOR"}
SUMMARY_KINDS = (
    ("shared", "shared"),
    ("backend_only", "backend-only"),
    ("not_comparable", "not comparable"),
    ("known", "known or expected"),
)
MESSAGE_CHARS = 300


# --- one backend on one commit ------------------------------------------------------------------


@dataclass
class CellFailures:
    """A cell's failing tests by normalised id (latest attempts only) and what we can infer."""

    cell: Cell
    tests: TestTable
    """Failing tests by identity: {TestId: the reported test (name, classname, file, job, …)}."""
    per_test: bool
    complete: bool
    job_level: list[str]
    """Failing jobs that reported no failed test but ran: build, collection or setup failures."""

    def failing(self, tid: TestId) -> bool:
        return self.tests.find(tid) is not None

    def passed(self, tid: TestId) -> bool | None:
        """Did this backend run the test and pass it? None when we cannot tell."""
        if self.failing(tid):
            return False
        if self.tests.has_key(tid.key):  # the same class and method failed here, module unclear
            return None
        return True if self.per_test and self.complete and self.cell.has_result else None

    @property
    def failed_as_job(self) -> bool:
        return bool(self.job_level)

    @property
    def build_failed(self) -> bool:
        """A job concluded `failure` without reporting a failed test: the build broke."""
        return any(v.state == State.FAILURE and not self.tests_of.get(v.job.id) for v in self.cell.verdicts)

    tests_of: dict = field(default_factory=dict)
    """Attempt id → the failed tests it reported."""
    infra: list[str] = field(default_factory=list)
    """Failing jobs the CI did not run to a report (infrastructure_failure): compared with nothing."""
    ids_of: dict = field(default_factory=dict)
    """Attempt id → the identities of the failed tests it reported, as `tests` holds them: what a
    reader judging job by job (the merge gate) names them by."""

    @property
    def infra_only(self) -> bool:
        return bool(self.infra) and not self.tests and not self.job_level

    def failing_jobs_without_tests(self) -> list[tuple[str, str]]:
        """(workflow, job) of each failing job that listed no failing test: compared as a job."""
        return sorted(
            (v.job.workflow_name, v.job.job_name)
            for v in self.cell.verdicts
            if v.state in FAILING and not self.tests_of.get(v.job.id)
        )


def cell_failures(cell: Cell, tests_by_job: dict[int, list]) -> CellFailures:
    tests = TestTable()
    job_level, infra, ids_of = [], [], {}
    for verdict in cell.verdicts:
        if verdict.state not in FAILING:
            continue
        reported = tests_by_job.get(verdict.job.id, [])
        ids = ids_of[verdict.job.id] = report_ids(reported, cell.project.device_type, reported_environment(reported))
        for test, tid in zip(reported, ids, strict=True):
            record = tests.setdefault(tid, {**test, "job": job_label(verdict.job), "identity": tid, "job_ids": []})
            record["job_ids"].append(verdict.job.id)  # every attempt failing it: on which variants
        if infrastructure_failure(verdict, reported):
            infra.append(job_label(verdict.job))
        elif not (reported or verdict.job.tests_failed):
            job_level.append(job_label(verdict.job))
    per_test = any(v.job.tests_total is not None for v in cell.verdicts)
    tests_of = {v.job.id: tests_by_job.get(v.job.id, []) for v in cell.verdicts}
    return CellFailures(cell, tests, per_test, not cell.pending, job_level, tests_of, infra, ids_of)


def infrastructure_failure(verdict, reported: list) -> bool:
    """The CI failed to run the job: decided by the job's own end (timed out, never started,
    cancelled) and the absence of any report. A report of errors alone is the job's own failure."""
    job = verdict.job
    return verdict.state in NO_BASELINE_STATES and not reported and job.tests_total is None and not job.tests_failed


def failures_load(cells: dict, with_messages: bool = False, name_contains: str = "") -> dict:
    """Each cell's CellFailures, by the same key: the failed tests of its failing latest attempts
    (one query for all; `name_contains` narrows them to one test's rows), read under the identity
    rule, modules filled in across the cells of one commit. The one sequence every reader of a
    cell's failures runs (pages, API, gate, notifications, levels); a failure's tests by attempt are
    its `tests_of`."""
    ids = latest_failing_job_ids(cells.values())
    tests = failed_tests_for_jobs(ids, with_messages=with_messages, name_contains=name_contains)
    failures = {key: cell_failures(cell, tests) for key, cell in cells.items()}
    resolve_commit_ids(failures.values())
    return failures


def resolve_commit_ids(failures: Iterable[CellFailures]) -> None:
    """Fill in missing modules from the other reports on the same commit (relay.policy.testids)."""
    by_sha: dict[str, list[CellFailures]] = {}
    for item in failures:
        by_sha.setdefault(item.cell.sha, []).append(item)
    for group in by_sha.values():
        resolver = TestIdResolver(tid for item in group for tid in item.tests)
        for item in group:
            resolved = TestTable()
            for tid, record in item.tests.items():
                kept = resolved.setdefault(resolver.resolve(tid), record)
                if kept is not record:  # two reports of one test: failing on both's attempts
                    kept["job_ids"] = [*kept.get("job_ids", ()), *record.get("job_ids", ())]
            item.tests = resolved
            item.ids_of = {job: [resolver.resolve(tid) for tid in ids] for job, ids in item.ids_of.items()}


def upstream_broken(reference: CellFailures | None, triage: CellTriage | None = None) -> bool:
    """The reference's build or tests failed on this commit (not: it did not run), and not every
    one of its failures is an open known issue's: a known breakage is not news (`triage`, from
    relay.results.triage.reference_triage, says which are known)."""
    if reference is None or reference.cell.state != State.FAILURE or reference.infra_only:
        return False
    return not (triage is not None and triage.complete)


def reference_known(reference: CellFailures | None, triage: CellTriage | None) -> list[dict]:
    """The open known issues the reference's failures match, each once: what a commit that is
    broken upstream *and known* says instead of the upstream-broken banner."""
    if reference is None or triage is None:
        return []
    issues = {m.issue.pk: m for m in triage.matches.values() if m.issue is not None}
    return [{"id": pk, "label": m.label, "url": m.url, "all": triage.complete} for pk, m in sorted(issues.items())]


def has_baseline(reference: CellFailures | None) -> bool:
    return reference is not None and reference.cell.has_result and not reference.infra_only


def test_kind(tid: TestId, reference: CellFailures) -> str:
    if reference.failing(tid):
        return "shared"
    return "backend_only" if reference.passed(tid) else "not_comparable"


def mark_for(backend: CellFailures, reference: CellFailures | None) -> str:
    """One mark for a failing cell: shared, backend, mixed or no_baseline."""
    if backend.infra_only:
        return INFRA
    if not has_baseline(reference):
        return NO_BASELINE
    kinds = {test_kind(t, reference) for t in backend.tests}
    if not kinds - {"not_comparable"}:
        if not reference.complete:
            return NO_BASELINE
        kinds = {job_level_kind(reference)}
    elif backend.job_level:
        kinds.add(job_level_kind(reference))
    return _combine(kinds)


def job_level_kind(reference: CellFailures) -> str:
    """Failures with no test to compare are compared as jobs: shared when the reference's build
    failed too, or (job-level only) when the reference failed at all."""
    return "shared" if reference.build_failed or (reference.cell.failing and not reference.per_test) else "backend_only"


def failure_kind(subject, reference: CellFailures | None) -> str:
    """One failure against the reference on the same commit: a test (TestId) by test_kind, a job
    failing without a test (a (workflow, job) key) by job_level_kind."""
    if not has_baseline(reference):
        return "not_comparable"
    return test_kind(subject, reference) if isinstance(subject, TestId) else job_level_kind(reference)


def reference_failures(sha: str) -> CellFailures | None:
    """The reference's CellFailures on one commit (two queries), or None without a reference."""
    reference = reference_backend(registered_backends())
    if reference is None:
        return None
    key = (sha, reference.id)
    return failures_load({key: cells_for_commits([sha], [reference])[key]})[key]


def unmuted(mine: CellFailures, mutes: Mutes | None) -> CellFailures:
    """The failures a cell's mark is made of: a test the backend muted (the mute rule's
    `Mutes.of`) marks nothing — it still shows, with its badge — so a muted backend-only failure
    beside shared ones leaves the cell shared, not mixed. When every failure is muted nothing else
    is left to mark by, and the mark stays that of its failures."""
    if not mutes:
        return mine
    project_id = mine.cell.project.id
    left = TestTable({tid: test for tid, test in mine.tests.items() if mutes.of(project_id, tid) is None})
    if len(left) == len(mine.tests) or not (left or mine.job_level):
        return mine
    return replace(mine, tests=left)


def _combine(kinds: set[str]) -> str:
    if kinds == {"shared"}:
        return SHARED
    if "shared" in kinds:
        return MIXED
    return BACKEND


# --- the grid: marks for many commits at once ---------------------------------------------------


def grid_baseline(cells: dict[CellKey, Cell], reference_id: int | None) -> tuple[dict[CellKey, str], set[str]]:
    """Marks for every failing non-reference cell and the upstream-broken SHAs, from the cells
    already loaded plus one query for the failing attempts' tests."""
    marks, broken, _, _ = _grid(cells, reference_id)
    return marks, broken


def _grid(cells: dict[CellKey, Cell], reference_id: int | None):
    """grid_baseline's marks and upstream-broken SHAs, and each failing cell's CellFailures."""
    failing = [c for c in cells.values() if c.failing and c.project.level != Level.L1]
    if not failing:
        return {}, set(), {}, {}
    triager = triager_load({c.project.id for c in failing})
    failures = failures_load({(c.sha, c.project.id): c for c in failing}, with_messages=needs_messages(triager))
    triage = cells_triage(failures, reference_id, triager)
    known = reference_triage(failures, reference_id, triager)
    references = {sha: f for (sha, pid), f in failures.items() if pid == reference_id}
    mutes = Mutes({c.project.id for c in failing if c.project.id != reference_id})
    marks = {}
    for (sha, pid), mine in failures.items():
        if pid != reference_id:
            marks[(sha, pid)] = _triaged_mark(mine, triage.get((sha, pid)), references, cells, reference_id, mutes)
    broken = {sha for sha, ref in references.items() if upstream_broken(ref, known.get(sha))}
    return marks, broken, failures, triage


def _triaged_mark(mine: CellFailures, triage: CellTriage | None, references, cells, reference_id, mutes=None) -> str:
    """Known or expected when every failure is accounted for; otherwise the baseline mark of
    the failures that are not (muted ones left out)."""
    if triage is not None and triage.complete:
        return triage.mark
    return _grid_mark(unmuted(open_remainder(mine, triage), mutes), references, cells, reference_id)


def _grid_mark(mine: CellFailures, references, cells, reference_id) -> str:
    if reference_id is None:
        return INFRA if mine.infra_only else NO_BASELINE
    return mark_for(mine, _reference_on(mine.cell.sha, references, cells, reference_id))


def _reference_on(sha: str, references, cells, reference_id) -> CellFailures | None:
    reference = references.get(sha)
    if reference is None:  # the reference did not fail here: its cell alone tells what it ran
        ref_cell = cells.get((sha, reference_id))
        reference = cell_failures(ref_cell, {}) if ref_cell else None
    return reference


def tests_summary(mine: CellFailures, reference: CellFailures | None, triage: CellTriage | None = None) -> str:
    """Test-level status beside the job's: "3 tests failing, all shared with the reference",
    "…: 1 shared, 1 backend-only, 1 known"; known and expected failures counted apart, as the
    mark leaves them out; jobs that failed without a test named after."""
    count, remainder = len(mine.tests), open_remainder(mine, triage)
    if not count:
        return _no_test_summary(remainder)
    kinds = Counter(test_kind(t, reference) if has_baseline(reference) else "not_comparable" for t in remainder.tests)
    kinds["known"] = count - len(remainder.tests)
    failing = f"{count} test{'s' if count != 1 else ''} failing"
    if kinds["shared"] == count:
        text = f"{failing}, {'all ' if count > 1 else ''}shared with the reference"
    elif kinds["backend_only"] == count:
        text = f"{failing}, none shared with the reference"
    else:
        text = f"{failing}: {', '.join(f'{kinds[k]} {label}' for k, label in SUMMARY_KINDS if kinds[k])}"
    jobs = len(remainder.job_level)
    return text + (f"; {jobs} job{'s' if jobs != 1 else ''} failed without a test" if jobs else "")


def _no_test_summary(mine: CellFailures) -> str:
    if mine.infra_only:
        return "infrastructure: the CI did not run the job to a report"
    jobs = len(mine.job_level)
    return (
        f"{jobs} job{'s' if jobs != 1 else ''} failed without a failing test (a build or collection error)"
        if jobs
        else ""
    )


@dataclass
class BackendBaseline:
    """One backend's page of head SHAs against the reference: its marks and the reference's cells."""

    reference: object | None
    marks: dict[str, str]
    reference_cells: dict[str, Cell]
    upstream_broken: set[str]
    summaries: dict[str, str] = field(default_factory=dict)
    """Failing head → tests_summary."""
    alone: dict[str, str] = field(default_factory=dict)
    """Failing head → the hardware variant alone failing there (relay.results.variants)."""


def backend_baseline(project, shas: list[str]) -> BackendBaseline:
    """Marks for one backend's failing heads, the reference's cell on each and the variant a head
    fails on alone (4 queries; a fifth for a backend declaring variants)."""
    reference = reference_backend(registered_backends())
    if reference is None or reference.id == project.id:
        alone = _alone(project, cells_for_commits(shas, [project])) if project.variant_keys else {}
        return BackendBaseline(reference, {}, {}, set(), alone=alone)
    cells = cells_for_commits(shas, [project, reference])
    marks, broken, failures, triage = _grid(cells, reference.id)
    references = {sha: f for (sha, pid), f in failures.items() if pid == reference.id}
    summaries = {
        sha: tests_summary(mine, _reference_on(sha, references, cells, reference.id), triage.get((sha, pid)))
        for (sha, pid), mine in failures.items()
        if pid == project.id
    }
    return BackendBaseline(
        reference,
        {sha: mark for (sha, pid), mark in marks.items() if pid == project.id},
        {sha: cells[(sha, reference.id)] for sha in shas},
        broken,
        summaries,
        _alone(project, cells),
    )


def _alone(project, cells: dict[CellKey, Cell]) -> dict[str, str]:
    return {sha: variant for (sha, pid), variant in cells_failing_alone(cells).items() if pid == project.id}


def baseline_marks(shas: list[str]) -> dict[CellKey, str]:
    """(sha, project_id) → shared | backend | mixed | no_baseline for each failing cell, in a
    constant number of queries."""
    projects = [p for p in registered_backends() if p.level != Level.L1]
    reference = reference_backend(projects)
    marks, _ = grid_baseline(cells_for_commits(list(shas), projects), reference.id if reference else None)
    return marks


# --- the commit page: the full comparison ------------------------------------------------------


@dataclass
class TestResult:
    test_id: str
    name: str
    kind: str
    job: str
    outcome: str = "failed"
    """failed, error or xpassed, as the producer reported it."""
    message: str = ""
    hw_classification: str = ""
    new_vs_parent: bool | None = None
    reference_new_vs_parent: bool | None = None
    also_failing_on: list[str] = field(default_factory=list)
    variant_only: str = ""
    """The hardware variant alone failing it of several that reported (relay.results.variants)."""
    known_as: str = ""
    """known or expected, when accounted for; then `known_label` and `known_url` say by what."""
    known_label: str = ""
    known_url: str = ""
    mark_known_url: str = ""

    @property
    def ranked_first(self) -> bool:
        return self.kind == "backend_only" and self.hw_classification.upper() in RANKED_FIRST


@dataclass
class BackendComparison:
    project_id: int
    full_name: str
    label: str
    level: str
    state: str
    glyph: str
    mark: str | None
    basis: str
    """per_test, job_level_only, no_baseline or passing."""
    shared: list[TestResult] = field(default_factory=list)
    backend_only: list[TestResult] = field(default_factory=list)
    not_comparable: list[TestResult] = field(default_factory=list)
    reference_only: list[TestResult] = field(default_factory=list)
    job_level_failures: list[str] = field(default_factory=list)
    infrastructure_failures: list[str] = field(default_factory=list)
    """Jobs the CI did not run to a report (infrastructure_failure): compared with nothing, never a backend regression."""
    tests_summary: str = ""
    known: list[TestResult] = field(default_factory=list)
    """Failures an open known issue or the backend's expectations account for: left out of the
    counts above (this list says how many were excluded)."""
    variant_only: str = ""
    """The hardware variant alone failing here, when every failing job is on it (relay.results.variants)."""


@dataclass
class MultiBackendFailure:
    test_id: str
    backends: list[str]
    reference: str
    """fails (likely upstream), passes (backend-specific on each) or unknown."""

    @property
    def reference_fails(self) -> bool:
        return self.reference == "fails"


@dataclass
class CommitBaseline:
    sha: str
    parent_sha: str
    reference: str | None
    reference_state: str | None
    status: str
    """compared, job_level_only, no_baseline or no_reference."""
    upstream_broken: bool
    upstream_broken_tests: int = 0
    """How many tests the reference failed (0 with upstream_broken: its build failed)."""
    reference_known_issues: list[dict] = field(default_factory=list)
    """Open known issues the reference's failures match ({id, label, url, all}); with `all` true
    on each, the commit is not upstream_broken: its breakage is known."""
    reference_failures: list[TestResult] = field(default_factory=list)
    reference_job_level_failures: list[str] = field(default_factory=list)
    backends: list[BackendComparison] = field(default_factory=list)
    multi_backend: list[MultiBackendFailure] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def for_backend(self, project_id: int) -> BackendComparison | None:
        return next((b for b in self.backends if b.project_id == project_id), None)


def commit_baseline(sha: str) -> CommitBaseline:
    """The full comparison for one commit (and its first parent, for "new vs parent")."""
    commit = UpstreamCommit.objects.filter(sha=sha).only("parent_sha").first()
    parent = commit.parent_sha if commit else ""
    projects = [p for p in registered_backends() if p.level != Level.L1]
    cells = cells_for_commits([sha, parent] if parent else [sha], projects)
    failures = failures_load(cells, with_messages=True)
    ref_project = reference_backend(projects)
    on_commit = {k: f for k, f in failures.items() if k[0] == sha}
    reference_id = ref_project.id if ref_project else None
    triager = triager_load({pid for (_, pid), f in on_commit.items() if f.cell.failing})
    triage = cells_triage(on_commit, reference_id, triager)
    known = reference_triage(on_commit, reference_id, triager).get(sha)
    return _compare_commit(sha, parent, projects, failures, triage, known)


def _compare_commit(
    sha: str,
    parent: str,
    projects,
    failures: dict[CellKey, CellFailures],
    triage: dict | None = None,
    ref_triage: CellTriage | None = None,
) -> CommitBaseline:
    triage = triage or {}
    ref_project = reference_backend(projects)
    ref = failures.get((sha, ref_project.id)) if ref_project else None
    ref_parent = failures.get((parent, ref_project.id)) if ref_project else None
    others = [p for p in projects if p is not ref_project]
    failing_on = _failing_on(sha, others, failures)
    mutes = Mutes([p.id for p in others])
    variants = cell_variants([f.cell for (on, _), f in failures.items() if on == sha])
    result = CommitBaseline(
        sha=sha,
        parent_sha=parent,
        reference=ref_project.full_name if ref_project else None,
        reference_state=ref.cell.state.value if ref else None,
        status=_status(ref_project, ref),
        upstream_broken=upstream_broken(ref, ref_triage),
        reference_job_level_failures=ref.job_level if ref else [],
        reference_known_issues=reference_known(ref, ref_triage),
    )
    if ref is not None:
        result.reference_failures = [
            _test_result(t, "reference", ref, ref_parent, ref_parent, failing_on) for t in sorted(ref.tests)
        ]
        result.upstream_broken_tests = len(ref.tests)
    for project in others:
        mine = failures[(sha, project.id)]
        comparison = _compare_backend(
            project,
            mine,
            failures.get((parent, project.id)),
            ref,
            ref_parent,
            failing_on,
            triage.get((sha, project.id)),
            mutes,
            variants,
        )
        result.backends.append(comparison)
    result.multi_backend = _multi_backend(failing_on, ref)
    return result


def _status(ref_project, ref: CellFailures | None) -> str:
    if ref_project is None:
        return "no_reference"
    if not has_baseline(ref):
        return NO_BASELINE
    return "compared" if ref.per_test else "job_level_only"


def _failing_on(sha: str, projects, failures) -> dict[TestId, list[str]]:
    failing: dict[TestId, list[str]] = {}
    for project in projects:
        for tid in failures[(sha, project.id)].tests:
            failing.setdefault(tid, []).append(project.label)
    return failing


def _compare_backend(
    project,
    mine: CellFailures,
    my_parent,
    ref,
    ref_parent,
    failing_on,
    triage: CellTriage | None = None,
    mutes=None,
    variants: Mapping[int, str] | None = None,
) -> BackendComparison:
    cell = mine.cell
    remainder = unmuted(open_remainder(mine, triage), mutes)
    mark = (
        (triage.mark if triage is not None and triage.complete else mark_for(remainder, ref)) if cell.failing else None
    )
    comparison = BackendComparison(
        project.id,
        project.full_name,
        project.label,
        project.level,
        cell.state.value,
        cell.glyph,
        mark=mark,
        basis=_basis(cell, ref),
        job_level_failures=remainder.job_level,
        infrastructure_failures=mine.infra,
        tests_summary=tests_summary(mine, ref, triage) if cell.failing else "",
        variant_only=failing_alone(cell, variants or {}),
    )
    alone = tests_failing_alone(cell, {t: r.get("job_ids", ()) for t, r in mine.tests.items()}, variants or {})
    for tid in sorted(mine.tests):
        kind = test_kind(tid, ref) if has_baseline(ref) else "not_comparable"
        ref_side_parent = ref_parent if kind == "shared" else None  # only a test the reference fails can be new there
        test = _test_result(tid, kind, mine, my_parent, ref_side_parent, failing_on, exclude=project.label)
        test.mark_known_url = mark_known_url({**mine.tests[tid]}, project.id, cell.sha)
        test.variant_only = alone.get(tid, "")
        match = triage.match_for(tid) if triage is not None else None
        if match is not None:
            test.known_as, test.known_label, test.known_url = match.kind, match.label, match.url
        getattr(comparison, "known" if match is not None else kind).append(test)
    for label in mine.job_level:
        match = triage.match_for(label) if triage is not None else None
        if match is not None:
            comparison.known.append(
                TestResult(
                    label, label, "job", label, known_as=match.kind, known_label=match.label, known_url=match.url
                )
            )
    comparison.backend_only.sort(key=lambda t: (not t.ranked_first, t.test_id))
    comparison.reference_only = _reference_only(ref, mine, ref_parent, failing_on)
    return comparison


def _basis(cell: Cell, ref: CellFailures | None) -> str:
    if not cell.failing:
        return "passing"
    if not has_baseline(ref):
        return NO_BASELINE
    return "per_test" if ref.per_test else "job_level_only"


def _reference_only(ref, mine: CellFailures, ref_parent, failing_on) -> list[TestResult]:
    if ref is None:
        return []
    return [
        _test_result(t, "reference_only", ref, None, ref_parent, failing_on)
        for t in sorted(ref.tests)
        if mine.passed(t)
    ]


def _test_result(
    tid: TestId, kind, source: CellFailures, my_parent, ref_parent, failing_on, exclude: str = ""
) -> TestResult:
    record = source.tests[tid]
    return TestResult(
        test_id=tid.full,
        name=_qualified(record),
        kind=kind,
        job=record["job"],
        outcome=record.get("outcome") or "failed",
        message=_first_line(record.get("message", "")),
        hw_classification=record.get("hw_classification") or "",
        new_vs_parent=_new_vs_parent(tid, my_parent),
        reference_new_vs_parent=_new_vs_parent(tid, ref_parent),
        also_failing_on=[b for b in failing_on.get(tid, []) if b != exclude],
    )


def _qualified(record: dict) -> str:
    return f"{record['classname']}.{record['name']}" if record["classname"] else record["name"]


def _first_line(message: str) -> str:
    line = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    return line[:MESSAGE_CHARS]


def _new_vs_parent(tid: TestId, parent: CellFailures | None) -> bool | None:
    """True: failing here but passing on the first parent; None: the parent cannot tell."""
    return None if parent is None else parent.passed(tid)


def _multi_backend(failing_on: dict[TestId, list[str]], ref: CellFailures | None) -> list[MultiBackendFailure]:
    several = [(t, backends) for t, backends in failing_on.items() if len(backends) > 1]
    several.sort(key=lambda item: (-len(item[1]), item[0]))
    return [MultiBackendFailure(t.full, backends, _reference_says(ref, t)) for t, backends in several]


def _reference_says(ref: CellFailures | None, tid: TestId) -> str:
    if not has_baseline(ref):
        return "unknown"
    passed = ref.passed(tid)
    return "fails" if passed is False else "passes" if passed else "unknown"
