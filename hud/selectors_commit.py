"""The commit page: resolve a SHA (or a prefix) to an upstream commit, and its detail per backend
and job, read through the cell engine (relay.results.cells)."""

from dataclasses import dataclass

from relay.models import Project, UpstreamCommit
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
from relay.results.variants import cell_variants, tests_failing_alone

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
    variants = cell_variants([cell])
    for verdict in cell.verdicts:
        failed = tests.get(verdict.job.id, [])
        failed_test_dicts_states(cell.project, failed, reference)
        groups = group_failed_tests(page_of(failed, page))
        details.append(JobDetail(verdict, cell.attempts_of(verdict), failed, groups, variants.get(verdict.job.id, "")))
    variant_only_marks(cell, {d.verdict.job.id: d.failed_tests for d in details}, variants)
    return details


def variant_only_marks(cell: Cell, tests_by_job: dict[int, list], variants: dict[int, str]) -> None:
    """Each failed test (a dict with its `test_id`) of the cell's jobs gets `variant_only`: the
    hardware variant it fails on alone (relay.results.variants), else ""."""
    failing: dict[str, list[int]] = {}
    for job_id, tests in tests_by_job.items():
        for test in tests:
            failing.setdefault(test["test_id"], []).append(job_id)
    alone = tests_failing_alone(cell, failing, variants)
    for tests in tests_by_job.values():
        for test in tests:
            test["variant_only"] = alone.get(test["test_id"], "")


def group_failed_tests(failed: list[dict]) -> list[tuple[str, list[dict]]]:
    groups: dict[str, list[dict]] = {}
    for test in failed:
        groups.setdefault(test["classname"] or test["file"] or "(no class)", []).append(test)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
