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

from relay.models import Level, Project, PullRequest, UpstreamCommit
from relay.results.baseline import CellFailures, cell_failures, has_baseline, resolve_commit_ids
from relay.results.cells import cells_for_commits, failed_tests_for_jobs, latest_failing_job_ids, reference_backend
from relay.results.triage import cells_triage
from relay.verdicts import FAILING, job_key_label

RECENT_TRUNK = 10
ALREADY, NEW, BACKEND_ONLY, KNOWN = "already_failing", "new", "backend_only", "known"
LABELS = {
    ALREADY: "already failing on trunk",
    NEW: "new in this PR",
    BACKEND_ONLY: "backend-only (new; the reference passes)",
    KNOWN: "known or expected (excluded)",
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
        counts = [(self.count(v), LABELS[v]) for v in (NEW, BACKEND_ONLY, ALREADY, KNOWN)]
        return ", ".join(f"{n} {label}" for n, label in counts if n) or "no failure"

    @property
    def blames_pr(self) -> bool:
        return any(f.verdict not in (ALREADY, KNOWN) for f in self.findings)


def pr_blame(head_sha: str, pr: PullRequest | None, projects: list[Project]) -> list[BackendBlame]:
    """One entry per backend failing on the head (L1 backends report nothing to compare)."""
    reference = reference_backend(projects)
    backends = [p for p in projects if p.level != Level.L1 and p is not reference]
    trunk = list(
        UpstreamCommit.objects.filter(is_trunk=True).order_by("-landed_at").values_list("sha", flat=True)[:RECENT_TRUNK]
    )
    before = list(dict.fromkeys(([pr.base_sha] if pr and pr.base_sha else []) + trunk))
    cells = cells_for_commits([head_sha, *before], backends + ([reference] if reference else []))
    tests = failed_tests_for_jobs(latest_failing_job_ids([c for c in cells.values() if c.failing]))
    failures = {key: cell_failures(cell, tests) for key, cell in cells.items()}
    resolve_commit_ids(failures.values())
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
        blame.findings.append(
            Finding(tid.full, "test", ALREADY if already else _new_kind(ref, ref.passed(tid) if ref else None))
        )
    for key in _failing_jobs_without_tests(head):
        already = any(_job_failing(b, key) for b in before)
        ref_passed = (not ref.cell.failing) if has_baseline(ref) else None
        blame.findings.append(Finding(job_key_label(key), "job", ALREADY if already else _new_kind(ref, ref_passed)))
    return blame


def _new_kind(ref: CellFailures | None, ref_passed: bool | None) -> str:
    return BACKEND_ONLY if has_baseline(ref) and ref_passed else NEW


def _failing_jobs_without_tests(failures: CellFailures) -> list[tuple[str, str]]:
    keys = []
    for verdict in failures.cell.verdicts:
        if verdict.state in FAILING and not failures.tests_of.get(verdict.job.id):
            keys.append((verdict.job.workflow_name, verdict.job.job_name))
    return sorted(keys)


def _job_failing(failures: CellFailures, key: tuple[str, str]) -> bool:
    verdict = failures.cell.verdict_for(key)
    return verdict is not None and verdict.state in FAILING
