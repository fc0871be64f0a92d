"""One test's truth, read from the test store (relay/models/teststore.py): its history across
upstream commits × backends, the reference's first; its flakiness state and mutes per backend;
and the selectors bisection builds on (`last_pass_before`, `health_of`).

**A cell** (one backend on one trunk commit) says the test's outcome on that backend's latest
attempt of the job that ran it: failed, error or xpassed (stored); passed after an earlier
attempt failed it (*on retry*); **passed (inferred)** where the backend reported per-test results
there and did not list it (the baseline's own rule: CellFailures.passed); **unknown** where it ran
but reported no per-test results (or is still running); nothing where it did not run. A failing
cell of a backend reads *shared* or *backend-only* by the baseline's one rule (`test_kind`
against the reference's failures on that commit); the reference's failing cell reads *shared*
when a backend fails it too, *reference only* when a backend ran it and passed.

**Since when**: per backend, the newest failing commit's streak walked back along trunk (as
relay.results.culprits walks one: a commit without a decided result neither ends nor extends
it, and no further than CRCR_CULPRIT_WINDOW commits) to its first failing commit and the last
passing one before it."""

import base64
import binascii
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from relay.models import (
    BISECT_EVENT,
    FAILING_OUTCOMES,
    HealthState,
    JobRun,
    Level,
    TestedCommit,
    TestHealth,
    TestIdentity,
    TestMute,
    TestRun,
    UpstreamCommit,
    identity_digest,
)
from relay.policy.testids import TestId, id_parts, parse_test_id
from relay.stats.runkinds import trunk_commits
from relay.triage.mutes import active_filter

from .baseline import failures_load, has_baseline, test_kind
from .bisections import NAMING, Since, bisections_of_test, since_which
from .cells import (
    cells_for_commits,
    reference_backend,
    registered_backends,
)

FAILING = {o.value for o in FAILING_OUTCOMES}
PAGE = 30
OUTCOMES = {
    "failed": ("✗", "failed"),
    "error": ("E", "error"),
    "xpassed": ("X", "passed unexpectedly (xpassed)"),
    "xfailed": ("x", "expected failure (xfailed)"),
    "skipped": ("s", "skipped"),
    "passed": ("✓", "passed"),
    "unknown": ("?", "unknown: no per-test results"),
    "none": ("·", "did not run"),
}
"""Each outcome's glyph and words: text, so colour is never the only signal."""
RESULT_CONCLUSIONS = {"success", "failure"}


# --- identities -------------------------------------------------------------------------------------


def identity_find(text: str) -> TestIdentity | None:
    """The stored identity named by `text` (the baseline's `test_id`), or None."""
    text = (text or "").strip()
    return TestIdentity.objects.filter(digest=identity_digest(text)).first() if text else None


UNSTORED = timedelta(hours=30)
"""How long a failure may sit in a job row before the test store writes it: the store's sweep
takes a minute, and looks back as far for a job that finishes late (relay.teststore.store.LOOKBACK)."""


def identity_unstored(text: str) -> TestIdentity | None:
    """The identity `text` names, unsaved: a test whose first failure the store has not written
    yet (its minute's lag) is read from the job rows as the store will read it. None for text
    that names no test method (`Class.test_…`)."""
    tid = parse_test_id(text)
    parts = id_parts(tid)
    if not parts.test_class or not parts.method.startswith("test"):
        return None
    fields = {"module": parts.module, "test_class": parts.test_class, "method": parts.method}
    return TestIdentity(
        digest=identity_digest(tid.full), identity=tid.full, dtypes=parts.dtypes, params=parts.params, **fields
    )


def test_id_of(identity: TestIdentity) -> TestId:
    module = identity.module
    return TestId(module, identity.identity[len(module) + 1 :] if module else identity.identity)


test_id_of.__test__ = False


def identities_matching(text: str, limit: int = 20) -> list[TestIdentity]:
    """Tests whose id is `text`, or whose method name starts with or id contains it (search)."""
    text = (text or "").strip()
    exact = identity_find(text)
    if exact is not None:
        return [exact]
    if len(text) < 4:
        return []
    query = Q(method__startswith=text) | Q(identity__icontains=text)
    return list(TestIdentity.objects.filter(query).order_by("identity")[:limit])


# --- state and mutes beside a failed test -----------------------------------------------------------


def reads_flaky(state: str, shared: bool) -> bool:
    """The one rule for the *flaky* mark beside a backend's failed test, on every page, in the API
    and in the PR's verdict: its state on the backend (relay.policy.flakiness.HealthState) is
    flaky, and the reference does not fail it too on that commit. A failure the reference shares
    reads shared and points upstream (relay.results.baseline): the backend's own flakiness neither
    explains nor excuses it."""
    return state == HealthState.FLAKY and not shared


@dataclass(frozen=True)
class TestState:
    """What every page shows beside a failed test: its flakiness state on that backend, its
    retry counts, and whether the backend muted it (until when)."""

    __test__ = False

    state: str = HealthState.HEALTHY
    pass_on_retry: int = 0
    fail_on_retry: int = 0
    failing_streak: int = 0
    muted_until: datetime | None = None
    mute_reason: str = ""
    shared: bool = False
    """The failure it shows beside is shared with the reference (`beside`)."""

    @property
    def flaky(self) -> bool:
        return reads_flaky(self.state, self.shared)

    def beside(self, kind: str) -> "TestState":
        """This state beside one failure of the backend, of baseline kind `kind`
        (relay.results.baseline.failure_kind: shared, backend_only, not_comparable)."""
        return replace(self, shared=kind == "shared")

    @property
    def muted(self) -> bool:
        return self.muted_until is not None


def states_for(pairs: set[tuple[int, str]]) -> dict[tuple[int, str], TestState]:
    """(project id, test id) → TestState, for the failed tests a page shows (three queries)."""
    if not pairs:
        return {}
    digests = {identity_digest(test): test for _, test in pairs}
    identities = dict(TestIdentity.objects.filter(digest__in=list(digests)).values_list("id", "digest"))
    by_identity = {pk: digests[d] for pk, d in identities.items()}
    projects = {pid for pid, _ in pairs}
    states = {}
    rows = TestHealth.objects.filter(identity_id__in=list(by_identity), project_id__in=projects)
    for row in rows:
        states[(row.project_id, by_identity[row.identity_id])] = TestState(
            row.state, row.pass_on_retry, row.fail_on_retry, row.failing_streak
        )
    for mute in active_mutes().filter(identity_id__in=list(by_identity), project_id__in=projects):
        key = (mute.project_id, by_identity[mute.identity_id])
        states[key] = replace(states.get(key, TestState()), muted_until=mute.expires_at, mute_reason=mute.reason)
    return {key: value for key, value in states.items() if key in pairs}


def active_mutes(now=None):
    return TestMute.objects.filter(active_filter(now))


def mutes_listed(backend: str = "", test_id: str = "", active: bool | None = None):
    """Mutes newest first, with their backend, test and audit rows (the API's list)."""
    rows = TestMute.objects.select_related("project", "identity").prefetch_related("events")
    if backend:
        rows = rows.filter(project__full_name__iexact=backend)
    if test_id:
        rows = rows.filter(identity__digest=identity_digest(test_id))
    if active is not None:
        rows = rows.filter(active_filter()) if active else rows.exclude(active_filter())
    return rows.order_by("-id")


def mute_found(pk: int) -> TestMute | None:
    return mutes_listed().filter(pk=pk).first()


def heals_after() -> int:
    """Clean passes in a row that make a flaky or broken test healthy: the deployment's setting,
    which the machine's step reads too (relay.teststore.store), never a number in a template."""
    return settings.CRCR_TEST_HEALED_AFTER


def health_of(identity: TestIdentity, project_id: int) -> TestHealth | None:
    """The (test, backend)'s flakiness state (None: it never failed there, so healthy)."""
    return TestHealth.objects.filter(identity=identity, project_id=project_id).first()


def flaky_tests(project_id: int, states=(HealthState.FLAKY,), limit: int = 200) -> list[TestHealth]:
    """A backend's flaky (or broken) tests, most flaky first (the partial index answers it)."""
    rows = TestHealth.objects.filter(project_id=project_id, state__in=states).select_related("identity")
    return list(rows.order_by("-flaky_commits", "-pass_on_retry", "identity__identity")[:limit])


# --- since when --------------------------------------------------------------------------------------


@dataclass
class OutcomeStreak:
    first_failing: str | None = None
    last_passing: str | None = None


def _window() -> int:
    """Trunk commits walked back for the first failing commit of a streak: the culprit window
    (relay.results.culprits walks as far)."""
    return settings.CRCR_CULPRIT_WINDOW


SLACK = timedelta(hours=1)
"""A job is created after its commit lands (dispatched after the push); an hour of slack for
clocks. Bounding created_at keeps a chronic test's reads to the commits asked about: the store's
index is (identity, project, created_at)."""


def _failing_shas(identity: TestIdentity, project_ids, shas, since) -> dict[int, set[str]]:
    rows = TestRun.objects.filter(
        identity=identity, project_id__in=list(project_ids), outcome__in=FAILING, sha__in=list(shas)
    )
    rows = rows.filter(created_at__gte=since - SLACK) if since else rows
    found: dict[int, set[str]] = {}
    for pid, sha in rows.values_list("project_id", "sha").distinct():
        found.setdefault(pid, set()).add(sha)
    return found


def _passed_on(project_ids, shas, since=None) -> set[tuple[int, str]]:
    """(project, sha) where the backend reported per-test results and finished (was stepped)."""
    rows = TestedCommit.objects.filter(project_id__in=list(project_ids), sha__in=list(shas), per_test=True)
    rows = rows.filter(created_at__gte=since - SLACK) if since else rows
    return {(pid, sha) for pid, sha, stepped in rows.values_list("project_id", "sha", "stepped_jobs") if stepped}


def streaks_of(identity: TestIdentity, project_ids, before: UpstreamCommit | None = None) -> dict[int, OutcomeStreak]:
    """Per backend: the first failing commit of its newest streak (at or before `before`) and
    the last passing commit before it (None: none in the window)."""
    commits = trunk_commits()
    if before is not None:
        commits = commits.filter(landed_at__lte=before.landed_at)
    chain, since = _chain(commits)
    failing = _failing_shas(identity, project_ids, chain, since)
    if not failing:
        return {}
    passed = _passed_on(failing, chain, since)
    return {pid: _walk(chain, shas, {s for p, s in passed if p == pid}) for pid, shas in failing.items()}


def _chain(commits) -> tuple[list[str], datetime | None]:
    """Trunk SHAs newest first, the culprit window's worth, and when the oldest landed."""
    rows = list(commits.order_by("-landed_at", "-id").values_list("sha", "landed_at")[: _window()])
    return [sha for sha, _ in rows], (rows[-1][1] if rows else None)


def _walk(chain: list[str], failing: set[str], passed: set[str]) -> OutcomeStreak:
    streak = OutcomeStreak()
    for sha in chain:
        if sha in failing:
            streak.first_failing = sha
        elif sha in passed and streak.first_failing:
            streak.last_passing = sha
            break
    return streak


def last_pass_before(identity: TestIdentity, project_id: int, sha: str) -> str | None:
    """The newest trunk commit before `sha` where the test passed on the backend (bisection's
    good end), walking back over commits without a decided result."""
    commit = UpstreamCommit.objects.filter(sha=sha).first()
    if commit is None:
        return None
    older = trunk_commits().filter(landed_at__lt=commit.landed_at)
    chain, since = _chain(older)
    failing = _failing_shas(identity, [project_id], chain, since).get(project_id, set())
    passed = {s for _, s in _passed_on([project_id], chain, since)}
    return next((s for s in chain if s in passed and s not in failing), None)


# --- the history ---------------------------------------------------------------------------------------


@dataclass
class Attempt:
    attempt: int
    outcome: str
    job: object
    """The attempt's job row (workflow_url, check_run_id: the log)."""
    inferred: bool = False


@dataclass(frozen=True)
class Probed:
    """A bisection's verification re-run of the test on a commit: its evidence, shown where the
    culprit is named (the culprit fails, its parent passes)."""

    role: str
    """culprit or parent (relay.models.BisectProbe.Role)."""
    outcome: str
    """fail or pass (the probe's reading of the test)."""
    bisection: int


@dataclass
class HistoryCell:
    project_id: int
    outcome: str = "none"
    inferred: bool = False
    attempts: list[Attempt] = field(default_factory=list)
    mark: str | None = None
    """shared, backend_only, not_comparable (a failing backend cell); shared or reference_only
    (the reference's failing cell)."""
    muted: bool = False
    flaky: bool = False
    """The failure here reads flaky (`reads_flaky`): the test is flaky on this backend now and the
    reference does not share it, so it is no regression."""
    first_failing: bool = False
    last_passing: bool = False
    probe: Probed | None = None
    """Where no run of the backend's counts here: a bisection's verification re-run of the test."""

    @property
    def glyph(self) -> str:
        return OUTCOMES[self.outcome][0]

    @property
    def label(self) -> str:
        words = OUTCOMES[self.outcome][1]
        return f"{words} (inferred)" if self.inferred else words

    @property
    def failing(self) -> bool:
        return self.outcome in FAILING

    @property
    def attempt(self) -> int | None:
        return self.attempts[-1].attempt if self.attempts else None

    @property
    def job(self):
        return self.attempts[-1].job if self.attempts else None

    @property
    def on_retry(self) -> bool:
        return self.outcome == "passed" and any(a.outcome in FAILING for a in self.attempts)


@dataclass
class HistoryRow:
    sha: str
    title: str
    landed_at: datetime
    cells: list[HistoryCell]


@dataclass
class BackendTestColumn:
    project: object
    health: TestHealth | None
    mute: TestMute | None
    streak: OutcomeStreak
    since: Since | None = None
    """Since which commit (relay.results.bisections.since_which): its verified culprit, else the
    streak's first failing commit; None when it is not failing."""


@dataclass
class TestHistory:
    __test__ = False

    identity: TestIdentity
    columns: list[BackendTestColumn]
    rows: list[HistoryRow]
    next_cursor: str | None = None
    bisections: list = field(default_factory=list)
    """The test's bisections on these backends (relay.results.bisections.BisectionRead), newest first."""

    @property
    def failing(self) -> bool:
        return any(cell.failing for row in self.rows for cell in row.cells)


def test_history(identity: TestIdentity, cursor: str | None = None, limit: int = PAGE) -> TestHistory:
    """Trunk commits newest first (a page of `limit`, after `cursor`) × backends, reference first.
    An identity the store has not written yet (unsaved: identity_unstored) has only the recent
    commits' job rows to show, read as the store will read them."""
    backends = [p for p in registered_backends() if p.level != Level.L1]
    ids = [p.id for p in backends]
    stored = identity.pk is not None
    bisections = [b for b in bisections_of_test(identity.identity) if b.bisection.project_id in ids]
    evidence = _evidence(bisections)
    commits = _page(cursor, limit, ids, {sha for sha, _ in evidence}, stored)
    more = len(commits) > limit
    commits = commits[:limit]
    rows = _rows(identity, commits, backends)
    _probes_fill(rows, evidence)
    health = (
        {h.project_id: h for h in TestHealth.objects.filter(identity=identity, project_id__in=ids)} if stored else {}
    )
    mutes = {m.project_id: m for m in active_mutes().filter(identity=identity, project_id__in=ids)} if stored else {}
    streaks = streaks_of(identity, ids) if stored else {}
    reference_ids = {p.id for p in backends if p.is_reference}
    for row in rows:
        for cell in row.cells:
            streak = streaks.get(cell.project_id)
            cell.first_failing = bool(streak) and streak.first_failing == row.sha
            cell.last_passing = bool(streak) and streak.last_passing == row.sha
            cell.muted = cell.project_id in mutes
            state = health[cell.project_id].state if cell.project_id in health else HealthState.HEALTHY
            cell.flaky = reads_flaky(state, cell.mark == "shared" and cell.project_id not in reference_ids)
    columns = [
        BackendTestColumn(p, health.get(p.id), mutes.get(p.id), streaks.get(p.id, OutcomeStreak())) for p in backends
    ]
    for column in columns:
        column.since = _since(column, bisections)
    return TestHistory(identity, columns, rows, _cursor(commits[-1]) if more and commits else None, bisections)


test_history.__test__ = False


def _evidence(bisections) -> dict[tuple[str, int], Probed]:
    """(sha, backend) → the decided verification re-run there, of the test's bisections (the latest)."""
    found = {}
    for read in reversed(bisections):  # oldest first: a newer bisection's re-run is the one shown
        for p in read.probes:
            if p.role != "search" and p.outcome in ("fail", "pass"):
                found[p.sha, read.bisection.project_id] = Probed(p.role, p.outcome, read.bisection.pk)
    return found


def _probes_fill(rows: list, evidence: dict[tuple[str, int], Probed]) -> None:
    for row in rows:
        for cell in row.cells:
            probed = evidence.get((row.sha, cell.project_id))
            if probed is not None and cell.outcome == "none":
                cell.outcome, cell.probe = ("failed" if probed.outcome == "fail" else "passed"), probed


def _since(column: BackendTestColumn, bisections) -> Since | None:
    """The column's answer: the verified bisection of this streak (from its last pass), else the range."""
    streak = column.streak
    if not streak.first_failing:
        return None
    verified = (
        b.bisection
        for b in bisections
        if b.bisection.project_id == column.project.id
        and b.bisection.state in NAMING
        and b.bisection.good_sha == streak.last_passing
    )
    return since_which(streak.first_failing, next(verified, None))


def _page(cursor: str | None, limit: int, project_ids: list[int], probed=frozenset(), stored: bool = True) -> list:
    """Trunk commits some backend has results on: those the store recorded, the recent ones whose
    job rows it has not swept yet (its minute's lag), and those a bisection of the test re-ran."""
    tested = TestedCommit.objects.filter(sha=OuterRef("sha"), project_id__in=project_ids)
    ran = JobRun.objects.filter(head_sha=OuterRef("sha"), project_id__in=project_ids).exclude(event_type=BISECT_EVENT)
    unswept = Q(landed_at__gte=timezone.now() - UNSTORED) & Q(Exists(ran)) & ~Q(Exists(tested))
    shown = (Q(Exists(tested)) | Q(sha__in=list(probed)) | unswept) if stored else unswept
    commits = trunk_commits().filter(shown)
    after = cursor_read(cursor)
    if after is not None:
        landed, pk = after
        commits = commits.filter(Q(landed_at__lt=landed) | Q(landed_at=landed, id__lt=pk))
    return list(commits.order_by("-landed_at", "-id")[: limit + 1])


def _cursor(commit: UpstreamCommit) -> str:
    raw = f"{commit.landed_at.isoformat()}|{commit.pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class BadCursor(ValueError):
    pass


def cursor_read(cursor: str | None) -> tuple[datetime, int] | None:
    """The (landed_at, id) a cursor points after; BadCursor for anything this module did not make."""
    if not cursor:
        return None
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        landed, _, pk = text.partition("|")
        when = parse_datetime(landed)
        if when is None:
            raise ValueError(landed)
        return when, int(pk)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise BadCursor(f"not a cursor this API gave: {cursor[:40]!r}") from exc


def _rows(identity: TestIdentity, commits: list[UpstreamCommit], backends: list) -> list[HistoryRow]:
    shas = [c.sha for c in commits]
    cells = cells_for_commits(shas, backends, detail=True)
    runs: dict[tuple[str, int], dict[int, str]] = {}
    stored = TestRun.objects.none()  # an identity the store has not written has no rows yet
    if identity.pk is not None:
        stored = TestRun.objects.filter(identity=identity, sha__in=shas, project_id__in=[p.id for p in backends])
    if commits:
        stored = stored.filter(created_at__gte=min(c.landed_at for c in commits) - SLACK)
    for sha, pid, job_id, outcome in stored.values_list("sha", "project_id", "job_run_id", "outcome"):
        runs.setdefault((sha, pid), {})[job_id] = outcome
    failures = _failures(cells, identity.method)
    reference = reference_backend(backends)
    tid = test_id_of(identity)
    rows = []
    for commit in commits:
        row_cells = [_cell(failures[(commit.sha, p.id)], runs.get((commit.sha, p.id), {}), tid) for p in backends]
        _marks(row_cells, backends, failures.get((commit.sha, reference.id)) if reference else None, tid)
        rows.append(HistoryRow(commit.sha, commit.title, commit.landed_at, row_cells))
    return rows


def _failures(cells: dict, method: str) -> dict:
    """Every cell's CellFailures (the baseline's reading of its latest attempts' failed tests,
    those whose name holds the test's method: every name of it does): what decides passed
    (inferred) and shared, and what a cell the minute sweep has not stored yet failed."""
    return failures_load(cells, name_contains=method)


def _cell(failures, runs: dict[int, str], tid: TestId) -> HistoryCell:
    cell = failures.cell
    result = HistoryCell(cell.project.id)
    if not runs:
        record = failures.tests.find(tid)
        if record is not None:  # failing on its latest attempt, not in the store yet
            job = next(v.job for v in cell.verdicts if v.job.id == record["job_run_id"])
            result.outcome, result.attempts = (
                record.get("outcome") or "failed",
                [Attempt(job.run_attempt, "failed", job)],
            )
        elif cell.verdicts:
            passed = failures.passed(tid)
            result.outcome, result.inferred = ("passed", True) if passed else ("unknown", False)
            result.attempts = [
                Attempt(v.job.run_attempt, result.outcome, v.job, result.inferred) for v in cell.verdicts[:1]
            ]
        return result
    outcomes = []
    for verdict in cell.verdicts:
        attempts = cell.attempts_of(verdict)
        if not any(job.id in runs for job in attempts):
            continue
        sequence = [Attempt(job.run_attempt, *_attempt_outcome(job, runs)) for job in attempts]
        outcomes.append(sequence)
    outcomes.sort(key=lambda seq: seq[-1].outcome not in FAILING)  # a failing job speaks first
    if outcomes:
        result.attempts = outcomes[0]
        result.outcome, result.inferred = outcomes[0][-1].outcome, outcomes[0][-1].inferred
    return result


def _attempt_outcome(job, runs: dict[int, str]) -> tuple[str, object, bool]:
    if job.id in runs:
        return runs[job.id], job, False
    ran = job.tests_total is not None and job.conclusion in RESULT_CONCLUSIONS and not job.failed_tests_truncated
    return ("passed", job, True) if ran else ("unknown", job, False)


def _marks(cells: list[HistoryCell], backends: list, reference, tid: TestId) -> None:
    """Shared or backend-only by the baseline's rule; the reference's cell by what backends did."""
    for cell, project in zip(cells, backends, strict=True):
        if cell.failing and not project.is_reference:
            cell.mark = test_kind(tid, reference) if has_baseline(reference) else "not_comparable"
    for cell, project in zip(cells, backends, strict=True):
        if cell.failing and project.is_reference:
            others = [c for c, p in zip(cells, backends, strict=True) if not p.is_reference]
            if any(c.failing for c in others):
                cell.mark = "shared"
            elif any(c.outcome == "passed" for c in others):
                cell.mark = "reference_only"
