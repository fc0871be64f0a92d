"""Outcomes as producers report them, in the baseline: test-level status beside the job's, a
report of errors alone (pytest's collection error) as the job's own failure compared like a build
failure, infrastructure only for a job the CI did not run to a report, and each test's outcome."""

import pytest

from relay.results.baseline import BACKEND, INFRA, SHARED, backend_baseline, baseline_marks, commit_baseline
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db
SHA = "e" * 40
CLASS = "test_ops.TestCommon"


@pytest.fixture
def reference():
    return ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, display_name="OpenReg")


@pytest.fixture
def ascend():
    UpstreamCommitFactory(sha=SHA)
    return ProjectFactory(full_name="Ascend/pytorch", level="L3", device="npu", display_name="Ascend")


def job(project, conclusion="failure", failed=(), suffix="PRIVATEUSE1", word="npu", **counts):
    row = JobRunFactory(project=project, head_sha=SHA, conclusion=conclusion, **{"tests_total": 100, **counts})
    for name, *outcome in failed:
        FailedTestFactory(
            job_run=row,
            name=f"test_{name}_{word}_float32",
            classname=CLASS + suffix,
            outcome=(outcome or ["failed"])[0],
        )
    return row


COLLECTION_ERROR = {"tests_total": 1, "tests_error": 1, "tests_failed": 0}
"""What pytest counts when the test module fails to import (tests/fixtures/pytorch-reports/openreg/
pytest-collection-error.xml): one error, no test."""


def test_a_collection_error_is_the_backends_own_failure_when_the_reference_ran(reference, ascend):
    job(reference, "success")
    job(ascend, **COLLECTION_ERROR)
    [comparison] = commit_baseline(SHA).backends
    assert comparison.mark == BACKEND and baseline_marks([SHA])[(SHA, ascend.id)] == BACKEND
    assert comparison.job_level_failures == ["ci / test"] and comparison.infrastructure_failures == []
    assert comparison.tests_summary == "1 job failed without a failing test (a build or collection error)"


def test_a_collection_error_is_shared_when_the_references_build_failed_too(reference, ascend):
    job(reference, word="openreg", **COLLECTION_ERROR)
    job(ascend, **COLLECTION_ERROR)
    baseline = commit_baseline(SHA)
    assert baseline.upstream_broken and baseline.reference_job_level_failures == ["ci / test"]
    assert baseline.backends[0].mark == SHARED


@pytest.mark.parametrize(
    "ended", [{"conclusion": "timed_out"}, {"conclusion": "cancelled"}, {"ended_by": "never_started"}]
)
def test_a_job_the_ci_did_not_run_to_a_report_is_infrastructure(reference, ascend, ended):
    job(reference, "success")
    job(ascend, **{"conclusion": "", "tests_total": None, **ended})
    [comparison] = commit_baseline(SHA).backends
    assert comparison.mark == INFRA and comparison.infrastructure_failures == ["ci / test"]
    assert comparison.tests_summary == "infrastructure: the CI did not run the job to a report"


def test_a_timed_out_job_that_reported_is_compared_on_what_it_reported(reference, ascend):
    job(reference, "success")
    job(ascend, "timed_out", failed=[("add",)])
    [comparison] = commit_baseline(SHA).backends
    assert comparison.mark == BACKEND and comparison.infrastructure_failures == []


def test_a_reference_the_ci_did_not_run_is_no_baseline_and_not_upstream_broken(reference, ascend):
    job(reference, "timed_out", tests_total=None, word="openreg")
    job(ascend, failed=[("add",)])
    baseline = commit_baseline(SHA)
    assert (baseline.upstream_broken, baseline.status) == (False, "no_baseline")
    assert baseline.backends[0].mark == "no_baseline"


def test_an_erroring_test_is_a_test_failure_and_says_it_errored(reference, ascend):
    job(reference, failed=[("add", "error")], word="openreg")
    job(ascend, failed=[("add", "error"), ("mul", "xpassed")])
    [comparison] = commit_baseline(SHA).backends
    assert [(t.test_id, t.outcome) for t in comparison.shared] == [(f"{CLASS}.test_add_float32", "error")]
    assert [(t.test_id, t.outcome) for t in comparison.backend_only] == [(f"{CLASS}.test_mul_float32", "xpassed")]


@pytest.mark.parametrize(
    "ascend_fails, reference_fails, summary",
    [
        (["add", "mul", "div"], ["add", "mul", "div"], "3 tests failing, all shared with the reference"),
        (["add"], ["add"], "1 test failing, shared with the reference"),
        (["add", "mul"], [], "2 tests failing, none shared with the reference"),
        (["add", "mul", "div"], ["add"], "3 tests failing: 1 shared, 2 backend-only"),
    ],
)
def test_the_backend_page_says_how_many_tests_fail_and_how_many_the_reference_shares(
    reference, ascend, ascend_fails, reference_fails, summary
):
    job(reference, "failure" if reference_fails else "success", [(n,) for n in reference_fails], word="openreg")
    job(ascend, failed=[(n,) for n in ascend_fails])
    assert backend_baseline(ascend, [SHA]).summaries == {SHA: summary}
    assert commit_baseline(SHA).backends[0].tests_summary == summary


def test_the_backend_page_shows_the_test_level_status_beside_the_job_s(client, reference, ascend):
    job(reference, "failure", [("add",), ("mul",), ("div",)], word="openreg")
    job(ascend, failed=[("add",), ("mul",), ("div",)])
    page = (
        client.get("/crcr/Ascend/pytorch?tab=pr").content.decode() + client.get("/crcr/Ascend/pytorch").content.decode()
    )
    assert "3 tests failing, all shared with the reference" in page


def test_a_retry_keeps_the_first_attempt_s_failed_tests(reference, ascend):
    first = job(ascend, failed=[("add",), ("mul",)], run_id="99", run_attempt=1)
    second = job(ascend, failed=[("div",)], run_id="99", run_attempt=2)
    assert sorted(first.failed_tests.values_list("name", flat=True)) == ["test_add_npu_float32", "test_mul_npu_float32"]
    assert list(second.failed_tests.values_list("name", flat=True)) == ["test_div_npu_float32"]
    [comparison] = commit_baseline(SHA).backends  # the latest attempt decides
    assert [t.test_id for t in comparison.not_comparable + comparison.backend_only] == [f"{CLASS}.test_div_float32"]


def test_the_summary_counts_known_failures_apart_and_names_jobs_failed_without_a_test(reference, ascend):
    from relay.models import KnownIssue

    KnownIssue.objects.create(title="mul is flaky", test_patterns=["TestCommon.test_mul*"])
    job(reference, "failure", [("add",)], word="openreg")
    job(ascend, failed=[("add",), ("mul",)])
    JobRunFactory(project=ascend, head_sha=SHA, conclusion="failure", job_name="build", tests_total=None)
    summary = "2 tests failing: 1 shared, 1 known or expected; 1 job failed without a test"
    assert backend_baseline(ascend, [SHA]).summaries == {SHA: summary}
    assert commit_baseline(SHA).backends[0].tests_summary == summary
