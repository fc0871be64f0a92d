"""Did this PR break a backend? For each backend failing on a PR head, each failing test (by
relay.testids identity) and each failing job without a test is

* **already failing on trunk**: the same backend fails it on the PR's base commit or on one of
  the newest `RECENT_TRUNK` trunk commits: not this PR's doing;
* **new in this PR**: not failing on trunk, and the reference fails it too on the head (or
  cannot tell): the PR likely broke it for everyone;
* **backend-only**: not failing on trunk, and the reference passed it on the head: new with
  this PR, on this backend alone.

Everything comes from one load of cells (head, base and recent trunk × the failing backends and
the reference), so the cost does not grow with history."""

from dataclasses import dataclass, field

from relay.models import Level, Project, PullRequest
from relay.results.baseline import CellFailures, failure_kind, failures_load
from relay.results.cells import cells_for_commits, reference_backend
from relay.results.triage import cells_triage
from relay.runkinds import trunk_commits
from relay.verdicts import FAILING, job_key_label

RECENT_TRUNK = 10
ALREADY, NEW, BACKEND_ONLY, KNOWN, INFRA = "already_failing", "new", "backend_only", "known", "infra"
LABELS = {
    ALREADY: "already failing on trunk",
    NEW: "new in this PR",
    BACKEND_ONLY: "backend-only (new; the reference passes)",
    KNOWN: "known or expected (excluded)",
    INFRA: "infrastructure (the CI did not run the job; not this PR's doing)",
}


@dataclass
class Finding:
    subject: str
    kind: str
    """"test" or "job"."""
    verdict: str

    @property
    def label(self) -> str:
        return LABELS[self.verdict]


@dataclass
class BackendBlame:
    project: Project
    findings: list[Finding] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        return sum(1 for f in self.findings if f.verdict == verdict)

    @property
    def headline(self) -> str:
        """The worst news first: backend-only and new failures are this PR's to look at."""
        counts = [(self.count(v), LABELS[v]) for v in (NEW, BACKEND_ONLY, ALREADY, KNOWN, INFRA)]
        return ", ".join(f"{n} {label}" for n, label in counts if n) or "no failure"

    @property
    def blames_pr(self) -> bool:
        return any(f.verdict not in (ALREADY, KNOWN, INFRA) for f in self.findings)


def pr_blame(head_sha: str, pr: PullRequest | None, projects: list[Project]) -> list[BackendBlame]:
    """One entry per backend failing on the head (L1 backends report nothing to compare)."""
    reference = reference_backend(projects)
    backends = [p for p in projects if p.level != Level.L1 and p is not reference]
    trunk = list(trunk_commits().order_by("-landed_at").values_list("sha", flat=True)[:RECENT_TRUNK])
    before = list(dict.fromkeys(([pr.base_sha] if pr and pr.base_sha else []) + trunk))
    cells = cells_for_commits([head_sha, *before], backends + ([reference] if reference else []))
    failures = failures_load(cells)
    ref = failures.get((head_sha, reference.id)) if reference else None
    triage = cells_triage({k: f for k, f in failures.items() if k[0] == head_sha}, reference.id if reference else None)
    blamed = [
        _blame(
            p, failures[(head_sha, p.id)], [failures[(sha, p.id)] for sha in before], ref, triage.get((head_sha, p.id))
        )
        for p in backends
    ]
    return [b for b in blamed if b.findings]


def _blame(
    project: Project, head: CellFailures, before: list[CellFailures], ref: CellFailures | None, triage=None
) -> BackendBlame:
    blame = BackendBlame(project)
    if not head.cell.failing:
        return blame
    for tid in sorted(head.tests):
        if triage is not None and triage.match_for(tid) is not None:
            blame.findings.append(Finding(tid.full, "test", KNOWN))
            continue
        already = any(b.failing(tid) for b in before)
        blame.findings.append(Finding(tid.full, "test", ALREADY if already else _new_kind(tid, ref)))
    for key in head.failing_jobs_without_tests():
        label = job_key_label(key)
        already = any(_job_failing(b, key) for b in before)
        verdict = INFRA if label in head.infra else ALREADY if already else _new_kind(key, ref)
        blame.findings.append(Finding(label, "job", verdict))
    return blame


def _new_kind(subject, ref: CellFailures | None) -> str:
    """The baseline's rule (relay.results.baseline.failure_kind): what the reference passed is
    this backend's alone; what it shares, or cannot tell, is new for everyone."""
    return BACKEND_ONLY if failure_kind(subject, ref) == "backend_only" else NEW


def _job_failing(failures: CellFailures, key: tuple[str, str]) -> bool:
    verdict = failures.cell.verdict_for(key)
    return verdict is not None and verdict.state in FAILING
