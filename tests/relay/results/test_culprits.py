"""Since which commit: the last pass, the first failure and the suspects between them."""

from datetime import UTC, datetime, timedelta

import pytest

from relay.results.culprits import streaks, trunk_chain
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 30, 12, tzinfo=UTC)


@pytest.fixture
def xpu():
    return ProjectFactory(full_name="intel/torch-xpu-ops", level="L2")


@pytest.fixture
def trunk():
    """Six trunk pushes c0 (oldest) … c5, each the first parent of the next."""
    commits, parent = [], ""
    for i in range(6):
        commit = UpstreamCommitFactory(
            sha=f"{i:x}" * 40, is_trunk=True, parent_sha=parent, landed_at=T0 + timedelta(hours=i)
        )
        commits.append(commit)
        parent = commit.sha
    return commits


def result(project, commit, conclusion, tests=(), job="test", **fields):
    job_run = JobRunFactory(
        project=project,
        head_sha=commit.sha,
        conclusion=conclusion,
        job_name=job,
        **{"tests_total": 100, "tests_failed": len(tests) or None, **fields},
    )
    for classname, name, file in tests:
        FailedTestFactory(job_run=job_run, classname=classname, name=name, file=file)
    return job_run


CONV_PYTEST = ("test.test_nn.TestNNDeviceTypeXPU", "test_conv2d_xpu_float32", "test/test_nn.py")
CONV_BARE = ("TestNNDeviceTypeXPU", "test_conv2d_xpu_float32", "")


def test_a_failing_job_names_the_last_pass_the_first_failure_and_the_suspects_between(xpu, trunk):
    c0, c1, c2, c3, c4, c5 = trunk
    for commit in (c0, c1):
        result(xpu, commit, "success")
    for commit in (c3, c4, c5):  # c2 has no result: it stays a suspect
        result(xpu, commit, "failure")
    (streak,) = [s for s in streaks(xpu) if s.kind == "job"]
    assert (streak.subject, streak.first_failing, streak.last_passing) == ("ci / test", c3, c1)
    assert streak.suspects == [c3, c2] and streak.failing_results == 3 and not streak.exact


def test_one_suspect_is_an_exact_culprit_with_a_compare_link(xpu, trunk):
    result(xpu, trunk[3], "success")
    result(xpu, trunk[4], "failure")
    (streak,) = streaks(xpu)
    assert streak.exact and streak.suspects == [trunk[4]]
    assert streak.compare_url.endswith(f"/compare/{trunk[3].sha}...{trunk[4].sha}")


def test_a_failing_test_is_followed_by_identity_whatever_shape_each_run_reported(xpu, trunk):
    result(xpu, trunk[2], "failure", tests=[("TestOtherXPU", "test_x_xpu", "test/test_other.py")])  # ran, passed conv
    result(xpu, trunk[3], "failure", tests=[CONV_PYTEST])
    result(xpu, trunk[4], "failure", tests=[CONV_BARE])
    result(xpu, trunk[5], "failure", tests=[CONV_PYTEST])
    tests = [s for s in streaks(xpu) if s.kind == "test"]
    assert [(s.subject, s.first_failing, s.last_passing) for s in tests] == [
        ("test_nn.TestNNDeviceType.test_conv2d_float32", trunk[3], trunk[2])
    ]


def test_a_job_failing_on_every_commit_in_the_window_has_no_last_pass(xpu, trunk):
    for commit in trunk:
        result(xpu, commit, "failure")
    (streak,) = streaks(xpu)
    assert streak.last_passing is None and streak.first_failing == trunk[0] and streak.failing_results == 6


def test_a_flaky_pass_ends_a_streak_and_a_passing_newest_commit_has_none(xpu, trunk):
    result(xpu, trunk[4], "failure", run_id="1", run_attempt=1)
    result(xpu, trunk[4], "success", run_id="1", run_attempt=2)
    result(xpu, trunk[5], "failure")
    (streak,) = streaks(xpu)
    assert streak.last_passing == trunk[4]
    result(xpu, trunk[5], "success", run_id="2")
    assert streaks(xpu, start=trunk[5]) == [] or all(s.kind != "job" for s in streaks(xpu, start=trunk[5]))


def test_nightly_results_give_the_range_between_two_nightly_shas(xpu, trunk):
    result(xpu, trunk[0], "success", event_type="nightly")
    result(xpu, trunk[4], "failure", event_type="nightly")
    (streak,) = streaks(xpu)
    assert streak.last_passing == trunk[0] and streak.suspects == [trunk[4], trunk[3], trunk[2], trunk[1]]


def test_streaks_can_start_from_an_older_commit(xpu, trunk):
    result(xpu, trunk[1], "success")
    result(xpu, trunk[2], "failure")
    result(xpu, trunk[5], "success")
    (streak,) = streaks(xpu, start=trunk[2])
    assert streak.first_failing == trunk[2] and streak.last_passing == trunk[1]


def test_the_chain_follows_first_parents_not_landing_order(trunk):
    stray = UpstreamCommitFactory(
        sha="f" * 40, is_trunk=True, parent_sha="", landed_at=T0 + timedelta(hours=4, minutes=30)
    )
    chain = trunk_chain()
    assert chain == list(reversed(trunk)) and stray not in chain  # a push off the first-parent line


def test_the_cost_does_not_grow_with_the_window(xpu, trunk, django_assert_max_num_queries):
    for commit in trunk:
        result(xpu, commit, "failure", tests=[CONV_PYTEST])
    with django_assert_max_num_queries(7):  # the walk's five, and the known issues' and expectations' two
        streaks(xpu)


def test_a_job_whose_tests_fail_is_answered_by_its_tests_alone_one_culprit_per_failure(xpu, trunk):
    """The job has been red since c2 (an upstream break the reference shares); test_conv2d broke
    at c4 on this backend alone. One answer: the test's culprit, c4, never the job's c2."""
    reference = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True)
    add = ("test_ops.TestCommonXPU", "test_add_xpu_float32", "test_ops.py")
    add_ref = ("test_ops.TestCommonPRIVATEUSE1", "test_add_openreg_float32", "test_ops.py")
    for i, commit in enumerate(trunk):
        result(reference, commit, "failure" if i >= 2 else "success", [add_ref] if i >= 2 else [])
        tests = ([add] if i >= 2 else []) + ([CONV_PYTEST] if i >= 4 else [])
        result(xpu, commit, "failure" if tests else "success", tests)
    found = {s.subject: s for s in streaks(xpu, trunk[5])}
    assert set(found) == {"test_ops.TestCommon.test_add_float32", "test_nn.TestNNDeviceType.test_conv2d_float32"}
    conv, add_streak = (
        found["test_nn.TestNNDeviceType.test_conv2d_float32"],
        found["test_ops.TestCommon.test_add_float32"],
    )
    assert (conv.first_failing, conv.last_passing, conv.vs_reference) == (trunk[4], trunk[3], "backend_only")
    assert (add_streak.first_failing, add_streak.vs_reference) == (trunk[2], "shared")


def test_a_job_failing_without_a_test_keeps_its_job_streak_compared_as_a_build_failure(xpu, trunk):
    reference = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True)
    for commit in trunk[3:]:
        result(reference, commit, "failure", tests_total=1, tests_error=1)
        result(xpu, commit, "failure", tests_total=1, tests_error=1)
    result(xpu, trunk[2], "success")
    (streak,) = streaks(xpu, trunk[5])
    assert (streak.kind, streak.first_failing, streak.vs_reference) == ("job", trunk[3], "shared")
