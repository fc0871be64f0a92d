"""The commit page: resolve a SHA (or a prefix) to an upstream commit, and its detail per backend
and job, read through the cell engine (relay.results.cells)."""

from dataclasses import dataclass

from relay.models import JobRun, Project, UpstreamCommit
from relay.policy.verdicts import (
    JobVerdict,
    State,
)
from relay.results.baseline import CellFailures, failures_load
from relay.results.cells import (
    Cell,
    cells_for_commits,
    reference_backend,
    registered_backends,
)
from relay.results.heads import commit_pr_number
from relay.results.status import TESTS_SOURCES
from relay.results.variants import only_variant, variant_of

from .paging import page_of
from .selectors_tests import failed_test_dicts_states


@dataclass
class JobDetail:
    verdict: JobVerdict
    attempts: list
    failed_tests: list[dict]
    failed_groups: list[tuple[str, list[dict]]]
    variant: str = ""
    """The job's hardware variant (relay.results.variants), "" when its backend declares none."""


@dataclass
class BackendDetail:
    cell: Cell
    jobs: list[JobDetail]

    @property
    def project(self) -> Project:
        return self.cell.project


@dataclass
class CommitDetail:
    sha: str
    commit: UpstreamCommit | None
    backends: list[BackendDetail]

    @property
    def pr_number(self) -> int | None:
        return commit_pr_number(self.commit)

    @property
    def has_any_result(self) -> bool:
        return any(b.cell.state != State.NO_RESULT for b in self.backends)

    @property
    def reference_tests_sources(self) -> list[str]:
        """Where the reference's imported per-test results came from (S3, artifact, log)."""
        sources = {
            j.verdict.job.tests_source
            for b in self.backends
            if b.project.is_reference
            for j in b.jobs
            if j.verdict.job.tests_total is not None and j.verdict.job.tests_source
        }
        return [label for value, label in TESTS_SOURCES.items() if value in sources]


def commit_detail(sha: str, commit: UpstreamCommit | None, page: int = 1) -> CommitDetail:
    """Every backend's jobs on one commit, each with all its attempts and the latest attempt's
    failed tests, its `page` of them grouped by test class (hud.paging)."""
    projects = registered_backends()
    cells = cells_for_commits([sha], projects, detail=True)
    failures = failures_load(cells, with_messages=True)
    reference = reference_backend(projects)
    backends = [
        BackendDetail(
            cells[(sha, p.id)],
            _job_details(
                cells[(sha, p.id)],
                failures[(sha, p.id)].tests_of,
                page,
                failures[(sha, reference.id)] if reference and reference is not p else None,
            ),
        )
        for p in projects
    ]
    return CommitDetail(sha, commit, backends)


def _job_details(cell: Cell, tests: dict[int, list], page: int, reference: CellFailures | None) -> list[JobDetail]:
    """Each job's attempts and failed tests, each test's state beside the `reference`'s failures."""
    details = []
    for verdict in cell.verdicts:
        failed = tests.get(verdict.job.id, [])
        failed_test_dicts_states(cell.project, failed, reference)
        variant = variant_of(verdict.job.environment, cell.project.variant_keys)
        groups = group_failed_tests(page_of(failed, page))
        details.append(JobDetail(verdict, cell.attempts_of(verdict), failed, groups, variant))
    _variant_only_mark(details)
    return details


def _variant_only_mark(details: list[JobDetail]) -> None:
    """Each failed test gets `variant_only`: the variant it fails on when that is the only one
    failing it of several variants whose every job has completed on the commit (a variant still
    running may yet fail it too), else ""."""
    pending = {d.variant for d in details if d.verdict.job.status != JobRun.Status.COMPLETED}
    reported = {d.variant for d in details} - pending
    failing_on: dict[str, set[str]] = {}
    for d in details:
        for test in d.failed_tests:
            failing_on.setdefault(test["test_id"], set()).add(d.variant)
    for d in details:
        for test in d.failed_tests:
            test["variant_only"] = only_variant(failing_on[test["test_id"]], reported)


def baseline_variant_marks(detail: CommitDetail, baseline) -> None:
    """Each test of the commit's baseline comparison (relay.results.baseline) gets the
    `variant_only` its backend's jobs gave it (_variant_only_mark), "" when none did."""
    marks = {
        (b.project.id, test["test_id"]): test["variant_only"]
        for b in detail.backends
        for job in b.jobs
        for test in job.failed_tests
        if test.get("variant_only")
    }
    for comparison in baseline.backends:
        for test in (*comparison.shared, *comparison.backend_only, *comparison.not_comparable, *comparison.known):
            test.variant_only = marks.get((comparison.project_id, test.test_id), "")


def group_failed_tests(failed: list[dict]) -> list[tuple[str, list[dict]]]:
    groups: dict[str, list[dict]] = {}
    for test in failed:
        groups.setdefault(test["classname"] or test["file"] or "(no class)", []).append(test)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
