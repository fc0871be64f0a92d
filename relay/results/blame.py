"""Did this PR break it, and does that block the merge? One answer, the PR's verdict, which the
PR page's verdict table shows and the merge gate enforces (relay.results.gate reads `jobs` here).
For each backend failing on a PR head (the reference too), each failing test (by relay.policy.testids
identity) and each failing job without a test is

* **muted**: the backend muted the test (relay.triage.mutes; a mute covers a test, never a job);
* **known or expected (excluded)**: the backend's expectations list it, or an open known issue an
  admin marked as not blocking the gate matches it (an issue that blocks the gate excuses
  nothing here: its failure is judged like any other);
* **flaky on this backend**: the test store's state for the test, read by the one rule
  (relay.results.tests.reads_flaky): a failure the reference shares on the head is never flaky;
* **already failing on trunk**: the same backend fails it on the PR's base commit or on one of
  the newest `RECENT_TRUNK` trunk commits, or the reference shares it on the head and already
  failed it there: not this PR's doing;
* **new in this PR**: not failing on trunk, and the reference fails it too on the head (or
  cannot tell): the PR likely broke it for everyone. On the reference itself, every failure the
  base and recent trunk did not have is the PR's own break of it, never "upstream broken";
* **backend-only**: not failing on trunk, and the reference passed it on the head: new with
  this PR, on this backend alone;
* **infrastructure**: the job timed out, never started or was cancelled: whatever it listed, it
  stopped before every test ran, so it proves nothing (as the pass rate never excuses it); re-run it;
* **not listed**: the job counted failures its list does not show, or its list was cut
  (relay.results.excused.listed_completely, the complete-list rule the pass rate applies too):
  what it left out cannot be shown not to be this PR's.

The first three and "already failing" never block; the others do (`BLOCKING`). A failing job
blocks the merge when any of its findings does (`BackendBlame.blocking_jobs`).

Everything comes from one load of cells (head, base and recent trunk × the failing backends and
the reference), so the cost does not grow with history."""

from dataclasses import dataclass, field

from relay.models import Level, Project, PullRequest
from relay.policy.testids import TestId
from relay.policy.verdicts import FAILING, NO_BASELINE_STATES, job_key, job_key_label
from relay.stats.runkinds import trunk_commits
from relay.triage.classify import EXPECTED
from relay.triage.mutes import Mutes

from .baseline import CellFailures, failure_kind, failures_load
from .cells import cells_for_commits, reference_backend
from .excused import listed_completely
from .tests import TestState, states_for
from .triage import cells_triage

RECENT_TRUNK = 10
ALREADY, NEW, BACKEND_ONLY, KNOWN, INFRA = "already_failing", "new", "backend_only", "known", "infra"
MUTED, FLAKY, UNLISTED = "muted", "flaky", "unlisted"
LABELS = {
    ALREADY: "already failing on trunk",
    NEW: "new in this PR",
    BACKEND_ONLY: "backend-only (new; the reference passes)",
    KNOWN: "known or expected (excluded)",
    MUTED: "muted",
    FLAKY: "flaky on this backend",
    INFRA: "infrastructure (timed out, never started or cancelled: re-run it)",
    UNLISTED: "not listed (the job counted more failures than it listed, or its list was cut)",
}
BLOCKING = frozenset({NEW, BACKEND_ONLY, INFRA, UNLISTED})
"""What blocks the merge: a failure new in this PR, and a job that shows too little to tell."""
HEADLINE_ORDER = (NEW, BACKEND_ONLY, UNLISTED, INFRA, ALREADY, KNOWN, MUTED, FLAKY)


@dataclass(frozen=True)
class Finding:
    subject: str
    kind: str
    """"test" or "job"."""
    verdict: str
    reason: str = ""
    """What excuses it, when something does: the mute or the known issue, named."""

    @property
    def label(self) -> str:
        return LABELS[self.verdict]

    @property
    def blocks(self) -> bool:
        return self.verdict in BLOCKING

    @property
    def text(self) -> str:
        """ "test_x already failing on trunk", "test_y muted until …": how the gate names it."""
        if self.verdict in (MUTED, KNOWN):  # the mute or the issue says it all
            return f"{self.subject} {self.reason}"
        return f"{self.subject} {self.label}" + (f" ({self.reason})" if self.reason else "")


@dataclass
class BackendBlame:
    project: Project
    findings: list[Finding] = field(default_factory=list)
    """Each failure once, as the verdict table lists them."""
    jobs: dict[tuple[str, str], list[Finding]] = field(default_factory=dict)
    """(workflow, job) of each failing job → its findings: what the gate reads."""

    def count(self, verdict: str) -> int:
        return sum(1 for f in self.findings if f.verdict == verdict)

    @property
    def headline(self) -> str:
        """The worst news first: what blocks is this PR's to look at."""
        counts = [(self.count(v), LABELS[v]) for v in HEADLINE_ORDER]
        return ", ".join(f"{n} {label}" for n, label in counts if n) or "no failure"

    @property
    def blocks(self) -> bool:
        """Did this PR break it: some failure blocks. On an L4 backend that blocks the merge."""
        return any(f.blocks for f in self.findings)

    @property
    def blocks_merge(self) -> bool:
        return self.blocks and self.project.level == Level.L4

    def clears(self, key: tuple[str, str]) -> bool:
        """A failing job none of whose findings blocks (one not found here blocks)."""
        findings = self.jobs.get(key)
        return bool(findings) and not any(f.blocks for f in findings)

    def _add(self, key: tuple[str, str], found: Finding) -> None:
        self.jobs.setdefault(key, []).append(found)
        if found not in self.findings:
            self.findings.append(found)


def pr_blame(head_sha: str, pr: PullRequest | None, projects: list[Project]) -> list[BackendBlame]:
    """One entry per backend failing on the head, the reference's first when it fails (L1
    backends report nothing to compare)."""
    reference = reference_backend(projects)
    backends = [p for p in projects if p.level != Level.L1 and p is not reference]
    trunk = list(trunk_commits().order_by("-landed_at").values_list("sha", flat=True)[:RECENT_TRUNK])
    before = list(dict.fromkeys(([pr.base_sha] if pr and pr.base_sha else []) + trunk))
    cells = cells_for_commits([head_sha, *before], backends + ([reference] if reference else []), detail=True)
    failures = failures_load(cells)
    ref = failures.get((head_sha, reference.id)) if reference else None
    on_head = {k: f for k, f in failures.items() if k[0] == head_sha}
    judge = _Judge(
        cells_triage(on_head, reference.id if reference else None),
        Mutes(p.id for p in backends),
        ref,
        _states(on_head, reference),
        [failures[(sha, reference.id)] for sha in before] if reference else [],
    )
    blamed = [
        judge.blame(p, failures[(head_sha, p.id)], [failures[(sha, p.id)] for sha in before])
        for p in ([reference] if reference else []) + backends
    ]
    return [b for b in blamed if b.findings]


def _states(on_head: dict, reference: Project | None) -> dict[tuple[int, str], TestState]:
    """(project id, test id) → the test store's TestState of the head's failed tests."""
    pairs = {
        (pid, t.full) for (_, pid), f in on_head.items() if reference is None or pid != reference.id for t in f.tests
    }
    return states_for(pairs)


@dataclass
class _Judge:
    """The rule above, applied to one head's failures (loaded once for every backend)."""

    triage: dict
    mutes: Mutes
    ref: CellFailures | None
    states: dict = field(default_factory=dict)
    """(project id, test id) → the test store's TestState of each failed test on the head."""
    ref_before: list = field(default_factory=list)
    """The reference on the base and recent trunk: a failure it shares there is upstream's."""

    def blame(self, project: Project, head: CellFailures, before: list[CellFailures]) -> BackendBlame:
        blame = BackendBlame(project)
        if not head.cell.failing:
            return blame
        for verdict in head.cell.verdicts:
            if verdict.state not in FAILING:
                continue
            key, reported = job_key(verdict.job), head.tests_of.get(verdict.job.id, [])
            for tid in dict.fromkeys(head.ids_of.get(verdict.job.id, [])):
                blame._add(key, self.test(project, head, tid, before))
            if verdict.state in NO_BASELINE_STATES or not reported or not listed_completely(verdict.job, reported):
                blame._add(key, self.job(project, head, verdict, before))
        return blame

    def test(self, project: Project, head: CellFailures, tid: TestId, before: list[CellFailures]) -> Finding:
        excuse = self._excuse(project, head, tid)
        if excuse is not None:
            return Finding(tid.full, "test", *excuse)
        if any(b.failing(tid) for b in before):
            return Finding(tid.full, "test", ALREADY)
        if self._upstreams(tid):
            return Finding(tid.full, "test", ALREADY, "the reference fails it on trunk too")
        return Finding(tid.full, "test", self._new(project, tid))

    def _upstreams(self, tid: TestId) -> bool:
        """Shared with the reference on the head, and the reference already failed it on the base
        or recent trunk: upstream broke it before this PR."""
        shared = self.ref is not None and self.ref.failing(tid)
        return shared and any(b.failing(tid) for b in self.ref_before)

    def job(self, project: Project, head: CellFailures, verdict, before: list[CellFailures]) -> Finding:
        """A failing job without a (complete) list: the CI did not run it, it shows less than it
        counted, or it broke before any test (a build break), compared as a job."""
        key, label = job_key(verdict.job), job_key_label(job_key(verdict.job))
        if label in head.infra or verdict.state in NO_BASELINE_STATES:  # whatever it listed, it stopped short
            return Finding(label, "job", INFRA)
        if head.tests_of.get(verdict.job.id) or label not in head.job_level:
            return Finding(label, "job", UNLISTED)
        match = self._match(project, head, label)
        if match is not None:
            return Finding(label, "job", KNOWN, match.label)
        already = any(_job_failing(b, key) for b in before)
        return Finding(label, "job", ALREADY if already else self._new(project, key))

    def _excuse(self, project: Project, head: CellFailures, tid: TestId) -> tuple[str, str] | None:
        muted = self.mutes.of(project.id, tid)
        if muted is not None:
            return MUTED, muted.label
        match = self._match(project, head, tid)
        if match is not None:
            return KNOWN, match.label
        state = self.states.get((project.id, tid.full))
        return (FLAKY, "") if state and state.beside(failure_kind(tid, self.ref)).flaky else None

    def _match(self, project: Project, head: CellFailures, subject):
        """The triage match that excuses a failure from the merge: the backend's own expectation,
        or a known issue an admin marked as not blocking the gate."""
        triage = self.triage.get((head.cell.sha, project.id))
        match = triage.match_for(subject) if triage is not None else None
        if match is None or not (match.kind == EXPECTED or not match.issue.blocks_gate):
            return None
        return match

    def _new(self, project: Project, subject) -> str:
        """The baseline's rule (relay.results.baseline.failure_kind): what the reference passed is
        this backend's alone; what it shares, or cannot tell, is new for everyone. The reference's
        own new failure is the PR's break of it."""
        if project.is_reference:
            return NEW
        return BACKEND_ONLY if failure_kind(subject, self.ref) == "backend_only" else NEW


def _job_failing(failures: CellFailures, key: tuple[str, str]) -> bool:
    verdict = failures.cell.verdict_for(key)
    return verdict is not None and verdict.state in FAILING


def reference_broken_by(blame: list[BackendBlame]) -> bool:
    """The reference fails on this PR head, and none of it is already failing on trunk: the PR
    broke the reference, so the head is not "upstream broken" and what backends share with it
    is the PR's too."""
    ref = next((b for b in blame if b.project.is_reference), None)
    return ref is not None and ref.blocks and not ref.count(ALREADY)
