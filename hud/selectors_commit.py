"""The commit page: resolve a SHA (or a prefix) to an upstream commit, and its detail per backend
and job, read through the cell engine (relay.results.cells)."""

from dataclasses import dataclass

from relay.models import Project, UpstreamCommit
from relay.results.cells import (
    Cell,
    cells_for_commits,
    failed_tests_for_jobs,
    latest_failing_job_ids,
    registered_backends,
)
from relay.results.heads import commit_pr_number
from relay.results.status import TESTS_SOURCES
from relay.verdicts import (
    JobVerdict,
    State,
)

from .paging import page_of
from .selectors_tests import failed_test_dicts_states


@dataclass
class JobDetail:
    verdict: JobVerdict
    attempts: list
    failed_tests: list[dict]
    failed_groups: list[tuple[str, list[dict]]]


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
    tests = failed_tests_for_jobs(latest_failing_job_ids(cells.values()), with_messages=True)
    backends = [BackendDetail(cells[(sha, p.id)], _job_details(cells[(sha, p.id)], tests, page)) for p in projects]
    return CommitDetail(sha, commit, backends)


def _job_details(cell: Cell, tests: dict[int, list], page: int) -> list[JobDetail]:
    details = []
    for verdict in cell.verdicts:
        failed = tests.get(verdict.job.id, [])
        failed_test_dicts_states(cell.project, failed)
        groups = group_failed_tests(page_of(failed, page))
        details.append(JobDetail(verdict, cell.attempts_of(verdict), failed, groups))
    return details


def group_failed_tests(failed: list[dict]) -> list[tuple[str, list[dict]]]:
    groups: dict[str, list[dict]] = {}
    for test in failed:
        groups.setdefault(test["classname"] or test["file"] or "(no class)", []).append(test)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
