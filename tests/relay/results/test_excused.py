"""The upstream-adjusted pass rate: which failed jobs are excused as upstream's, and by what."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.models import MAX_FAILED_TESTS, FailedTest, KnownIssue
from relay.policy.verdicts import Rates
from relay.results.excused import AdjustedRates, excused_jobs
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory

pytestmark = pytest.mark.django_db

SHA, OTHER = "a" * 40, "c" * 40
REF_ADD = ("TestFooPRIVATEUSE1", "test_add_privateuse1_float32")
XPU_ADD = ("TestFooXPU", "test_add_xpu_float32")
XPU_MUL = ("TestFooXPU", "test_mul_xpu_float32")
VERDICT = {"schema_version": 1, "category": "upstream", "confidence": "high", "summary": "upstream broke it"}


@pytest.fixture
def reference():
    return ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, hardware_kind="reference")


@pytest.fixture
def xpu():
    return ProjectFactory(full_name="intel/torch-xpu-ops", level="L3", device="xpu")


def run(project, conclusion="success", sha=SHA, failed=(), job_name="test", **fields):
    job = JobRunFactory(
        project=project,
        head_sha=sha,
        conclusion=conclusion,
        job_name=job_name,
        tests_total=fields.pop("tests_total", 100),
        tests_failed=fields.pop("tests_failed", len(failed) or None),
        **fields,
    )
    for classname, name in failed:
        FailedTestFactory(job_run=job, classname=classname, name=name, file="", hw_classification="")
    return job


def since():
    return timezone.now() - timedelta(days=7)


def test_a_job_whose_every_failure_the_reference_shares_is_excused_with_the_commit_anchor(reference, xpu):
    run(reference, "failure", failed=[REF_ADD])
    job = run(xpu, "failure", failed=[XPU_ADD])
    [excused] = excused_jobs(xpu, since())
    assert excused.job_id == job.id and excused.reason == "baseline"
    assert excused.evidence[0].url == f"/commit/{SHA}#compare-{xpu.id}"


def test_a_job_with_one_failure_of_its_own_is_not_excused(reference, xpu):
    run(reference, "failure", failed=[REF_ADD])
    run(xpu, "failure", failed=[XPU_ADD, XPU_MUL])
    assert excused_jobs(xpu, since()) == []


def test_each_job_is_judged_alone_on_a_commit(reference, xpu):
    run(reference, "failure", failed=[REF_ADD])
    shared = run(xpu, "failure", failed=[XPU_ADD], job_name="shard 1")
    run(xpu, "failure", failed=[XPU_MUL], job_name="shard 2")
    assert [e.job_id for e in excused_jobs(xpu, since())] == [shared.id]


def test_a_truncated_failure_list_cannot_show_every_failure_is_shared(reference, xpu):
    run(reference, "failure", failed=[REF_ADD])
    run(xpu, "failure", failed=[XPU_ADD], tests_failed=40)
    assert excused_jobs(xpu, since()) == []


def test_an_open_upstream_known_issue_excuses_and_links_the_issue(reference, xpu):
    issue = KnownIssue.objects.create(
        title="mul broken upstream", kind="upstream", test_patterns=["TestFoo.test_mul_*"]
    )
    KnownIssue.objects.create(title="add is ours", kind="product", test_patterns=["TestFoo.test_add_*"])
    run(reference, "failure", failed=[REF_ADD])
    run(xpu, "failure", failed=[XPU_ADD, XPU_MUL])
    [excused] = excused_jobs(xpu, since())
    assert excused.reason == "baseline, known_issue"
    assert f"/known-issues/{issue.pk}" in [e.url for e in excused.evidence]


def test_a_product_known_issue_does_not_excuse(reference, xpu):
    KnownIssue.objects.create(title="ours", kind="product", test_patterns=["TestFoo.test_mul_*"])
    run(reference, "success")
    run(xpu, "failure", failed=[XPU_MUL])
    assert excused_jobs(xpu, since()) == []


def test_a_build_failure_that_lists_no_failed_test_is_never_excused(reference, xpu):
    """Nothing to check: a job excused for listing nothing could excuse any failure of its own."""
    run(reference, "failure", tests_total=None)
    run(xpu, "failure")
    KnownIssue.objects.create(title="builds broken upstream", kind="upstream", test_patterns=["ci / test"])
    assert excused_jobs(xpu, since()) == []


# --- the list must be complete (issue 45, item 4) ----------------------------------------------------------


def test_a_job_claiming_failures_it_does_not_list_is_not_excused_by_the_references_broken_build(reference, xpu):
    run(reference, "failure", tests_total=None)
    run(xpu, "failure", tests_failed=40)
    assert excused_jobs(xpu, since()) == []


def test_a_job_listing_fewer_failures_than_it_counted_is_not_excused_on_the_listed_ones(reference, xpu):
    KnownIssue.objects.create(title="mul upstream", kind="upstream", test_patterns=["TestFoo.test_mul_*"])
    run(reference, "failure", failed=[REF_ADD])
    run(xpu, "failure", failed=[XPU_MUL], tests_failed=2)
    run(xpu, "failure", sha=OTHER, failed=[XPU_ADD, XPU_MUL], tests_failed=1, tests_error=2)
    assert excused_jobs(xpu, since()) == []


def test_a_list_whose_failures_were_not_counted_or_were_cut_is_not_excused(reference, xpu):
    run(reference, "failure", failed=[REF_ADD])
    run(xpu, "failure", failed=[XPU_ADD], tests_failed=None)
    run(xpu, "failure", sha=OTHER, failed=[XPU_ADD], failed_tests_truncated=True)
    run(reference, "failure", sha=OTHER, failed=[REF_ADD])
    assert excused_jobs(xpu, since()) == []


def test_a_complete_list_counting_errors_and_unexpected_passes_is_excused(reference, xpu):
    KnownIssue.objects.create(title="mul upstream", kind="upstream", test_patterns=["TestFoo.test_mul_*"])
    run(reference, "failure", failed=[REF_ADD])
    job = run(xpu, "failure", failed=[XPU_ADD, XPU_MUL], tests_failed=1, tests_error=1)
    assert [e.job_id for e in excused_jobs(xpu, since())] == [job.id]


@pytest.mark.parametrize("conclusion", ["cancelled", "timed_out", "stale"])
def test_a_cancelled_or_timed_out_job_is_never_excused(reference, xpu, conclusion):
    xpu.excuse_triage_verdicts = True
    xpu.save()
    run(reference, "failure", failed=[REF_ADD])
    run(xpu, conclusion, failed=[XPU_ADD], triage_verdict=VERDICT)
    assert excused_jobs(xpu, since()) == []


def test_no_reference_result_excuses_nothing(reference, xpu):
    run(xpu, "failure", failed=[XPU_ADD])
    assert excused_jobs(xpu, since()) == []


def test_a_passing_retry_is_no_failure_to_excuse(reference, xpu):
    run(reference, "failure", failed=[REF_ADD])
    first = run(xpu, "failure", failed=[XPU_ADD])
    run(xpu, "success", run_id=first.run_id, run_attempt=2)
    assert excused_jobs(xpu, since()) == []


def test_a_job_dated_before_the_window_is_left_out(reference, xpu):
    run(reference, "failure", failed=[REF_ADD])
    old = run(xpu, "failure", failed=[XPU_ADD])
    type(old).objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=8))
    assert excused_jobs(xpu, since()) == []


def test_a_high_confidence_verdict_excuses_only_when_the_registry_allows_it(reference, xpu):
    run(reference, "success")
    run(xpu, "failure", failed=[XPU_MUL], triage_verdict=VERDICT)
    assert excused_jobs(xpu, since()) == []
    xpu.excuse_triage_verdicts = True
    xpu.save()
    [excused] = excused_jobs(xpu, since())
    assert excused.reason == "triage_verdict" and excused.evidence[0].url.endswith(f"#backend-{xpu.id}")


def test_a_medium_confidence_or_backend_verdict_never_excuses(reference, xpu):
    xpu.excuse_triage_verdicts = True
    xpu.save()
    run(reference, "success")
    run(xpu, "failure", failed=[XPU_MUL], triage_verdict={**VERDICT, "confidence": "medium"})
    run(xpu, "failure", sha=OTHER, failed=[XPU_MUL], triage_verdict={**VERDICT, "category": "backend"})
    assert excused_jobs(xpu, since()) == []


def test_the_adjusted_rate_leaves_excused_jobs_out_of_the_count():
    rates = AdjustedRates(Rates(passed=80, failed=20, infra=0, pending=0, first_attempt_passed=80), [object()] * 15)
    assert rates.raw_pass_rate == 0.8 and round(rates.adjusted_pass_rate, 3) == 0.941
    assert rates.pass_rate("raw") == 0.8 and rates.pass_rate("adjusted") == rates.adjusted_pass_rate


def test_the_adjusted_rate_never_excuses_more_jobs_than_the_raw_rates_count_as_failed():
    """The raw rates come from rollups that may lag the jobs read for the excused list."""
    rates = AdjustedRates(Rates(passed=5, failed=1, infra=0, pending=0, first_attempt_passed=5), [object()] * 3)
    assert rates.excused_count == 1 and rates.adjusted_pass_rate == 1.0


def test_a_cached_list_is_never_one_change_behind(reference, xpu):
    from django.core.cache import cache

    from relay.results.excused import adjusted_rates

    cache.clear()
    raw = Rates(passed=0, failed=1, infra=0, pending=0, first_attempt_passed=0)
    run(reference, "success")
    run(xpu, "failure", failed=[XPU_MUL])
    assert adjusted_rates(xpu, raw, since()).excused == []
    KnownIssue.objects.create(title="mul upstream", kind="upstream", test_patterns=["TestFoo.test_mul_*"])
    assert len(adjusted_rates(xpu, raw, since()).excused) == 1


# --- a list without counts, as the upstream callback action sends it (issue 50, item 10) -------------


def _listed_without_counts(project, tests, sha=SHA, **fields):
    """What the callback stores for the action's body with `failed_tests` and no `test_results`:
    no count at all (tests_total None), the list as sent."""
    job = run(project, "failure", sha=sha, tests_total=None, tests_failed=None, **fields)
    FailedTest.objects.bulk_create(
        [FailedTest(job_run=job, classname=c, name=n, file="", hw_classification="") for c, n in tests]
    )
    return job


def test_a_list_without_counts_whose_every_failure_the_reference_shares_is_excused(reference, xpu):
    run(reference, "failure", failed=[REF_ADD])
    job = _listed_without_counts(xpu, [XPU_ADD])
    assert [e.job_id for e in excused_jobs(xpu, since())] == [job.id]


def test_a_list_without_counts_at_the_actions_cap_or_marked_truncated_is_not_excused(reference, xpu):
    many = [("TestFooXPU", f"test_add_{i}_xpu_float32") for i in range(MAX_FAILED_TESTS)]
    run(reference, "failure", failed=[(c.replace("XPU", "PRIVATEUSE1"), n) for c, n in many[:1]])
    run(reference, "failure", sha=OTHER, failed=[REF_ADD])
    KnownIssue.objects.create(title="all upstream", kind="upstream", test_patterns=["TestFoo.test_add_*"])
    _listed_without_counts(xpu, many)
    _listed_without_counts(xpu, [XPU_ADD], sha=OTHER, failed_tests_truncated=True)
    assert excused_jobs(xpu, since()) == []
    FailedTest.objects.filter(job_run__head_sha=SHA, name=many[-1][1]).delete()  # 999: below the cap
    assert len(excused_jobs(xpu, since())) == 1
