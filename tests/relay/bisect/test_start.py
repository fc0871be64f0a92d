"""When to bisect: a backend-only failure on a trunk commit, not flaky, whose last pass is more than
one first-parent commit back, on a backend that opted in; the tests that went red together are
one bisection. The range comes from GitHub's compare API (the stand-in)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.bisect.ranges import RangeUnavailable, first_parent_range
from relay.bisect.start import bisection_consider
from relay.models import Bisection, BisectProbe, HealthState, TestHealth, TestIdentity
from relay.teststore.store import store_sweep
from tests.factories import ProjectFactory, UpstreamCommitFactory
from tests.relay.teststore.conftest import named, ran

from .conftest import ADD, sha_of

pytestmark = pytest.mark.django_db
UPSTREAM = "pytorch/pytorch"
MUL = "test_ops.TestFoo.test_mul_float32"


@pytest.fixture
def upstream(standin, relay_settings):
    standin.add_installation(installation_id=1, account="pytorch")
    standin.add_repo(UPSTREAM, repo_id=65600975, installation_id=1)
    return standin


@pytest.fixture
def nightly(upstream, xpu):
    """Twelve commits land between two nightlies: the reference passes both, XPU passes the first
    and fails test_add on the second."""
    start = timezone.now() - timedelta(hours=5)
    commits = []
    for n in range(13):
        upstream.add_commit(UPSTREAM, sha_of(n), parents=[sha_of(n - 1)] if n else [], message=f"change {n}")
        commits.append(UpstreamCommitFactory(sha=sha_of(n), landed_at=start + timedelta(minutes=n)))
    reference = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, display_name="OpenReg")
    for project in (reference, xpu):
        ran(project, commits[0])
    return {"reference": reference, "commits": commits}


def fail_on_newest(nightly, xpu, reference_too=False, methods=("test_add",)):
    newest = nightly["commits"][-1]
    ran(xpu, newest, "failure", [named("XPU", "xpu", m) for m in methods])
    if reference_too:
        ran(nightly["reference"], newest, "failure", [named("PRIVATEUSE1", "openreg", m) for m in methods])
    else:
        ran(nightly["reference"], newest)
    store_sweep(timezone.now())
    return newest.sha


def test_a_backend_only_failure_in_a_twelve_commit_range_starts_a_bisection_over_it(nightly, xpu):
    bisection = bisection_consider(xpu.pk, fail_on_newest(nightly, xpu))
    assert (bisection.state, bisection.good_sha, bisection.bad_sha) == ("searching", sha_of(0), sha_of(12))
    assert bisection.commits == [sha_of(n) for n in range(1, 13)]
    assert bisection.tests == [{"test_id": ADD, "job": "ci / test"}]
    assert (bisection.good_index, bisection.bad_index) == (0, 12)


def test_tests_that_went_red_together_are_one_bisection(nightly, xpu):
    bisection = bisection_consider(xpu.pk, fail_on_newest(nightly, xpu, methods=("test_add", "test_mul")))
    assert sorted(t["test_id"] for t in bisection.tests) == [ADD, MUL]
    assert Bisection.objects.count() == 1


def test_a_shared_failure_starts_no_bisection(nightly, xpu):
    assert bisection_consider(xpu.pk, fail_on_newest(nightly, xpu, reference_too=True)) is None
    assert not Bisection.objects.exists()


def test_a_flaky_test_is_not_bisected(nightly, xpu):
    sha = fail_on_newest(nightly, xpu)
    TestHealth.objects.filter(identity=TestIdentity.objects.get(identity=ADD), project=xpu).update(
        state=HealthState.FLAKY
    )
    assert bisection_consider(xpu.pk, sha) is None


def test_a_backend_that_did_not_opt_in_is_not_bisected(nightly, xpu):
    xpu.bisect_enabled = False
    xpu.save()
    assert bisection_consider(xpu.pk, fail_on_newest(nightly, xpu)) is None


def test_a_failure_whose_last_pass_is_its_parent_needs_no_bisection(nightly, xpu):
    ran(xpu, nightly["commits"][11])
    ran(nightly["reference"], nightly["commits"][11])
    assert bisection_consider(xpu.pk, fail_on_newest(nightly, xpu)) is None


def test_the_same_failure_is_not_bisected_twice(nightly, xpu):
    sha = fail_on_newest(nightly, xpu)
    Bisection.objects.filter(pk=bisection_consider(xpu.pk, sha).pk).update(state="verified")
    assert bisection_consider(xpu.pk, sha) is None


def test_a_backend_with_a_bisection_running_starts_no_second(nightly, xpu):
    sha = fail_on_newest(nightly, xpu)
    assert bisection_consider(xpu.pk, sha) is not None
    Bisection.objects.update(tests=[])
    assert bisection_consider(xpu.pk, sha) is None


def test_a_search_the_budget_cannot_cover_ends_at_once_and_says_so(nightly, xpu):
    xpu.bisect_daily_budget = 5
    xpu.save()
    bisection = bisection_consider(xpu.pk, fail_on_newest(nightly, xpu))
    assert (bisection.state, bisection.note) == ("over_budget", "needs 6 probes, 5 of today's 5 left")
    assert not BisectProbe.objects.exists()


def test_the_test_store_step_starts_the_bisection_and_its_first_probe(nightly, xpu, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        fail_on_newest(nightly, xpu)
    probe = BisectProbe.objects.get()
    assert (probe.bisection.bad_sha, probe.sha, probe.dispatch.project) == (sha_of(12), sha_of(6), xpu)


def test_the_range_follows_first_parents_past_a_merged_side_branch(upstream):
    for n in range(3):
        upstream.add_commit(UPSTREAM, sha_of(n), parents=[sha_of(n - 1)] if n else [])
    upstream.add_commit(UPSTREAM, sha_of(1, "side"), parents=[sha_of(0)])
    upstream.add_commit(UPSTREAM, sha_of(3), parents=[sha_of(2), sha_of(1, "side")])
    assert first_parent_range(sha_of(0), sha_of(3)) == [sha_of(1), sha_of(2), sha_of(3)]


def test_an_unknown_range_is_unavailable(upstream):
    upstream.add_commit(UPSTREAM, sha_of(0))
    with pytest.raises(RangeUnavailable):
        first_parent_range(sha_of(0), sha_of(9))


def _one_more(nightly, upstream, xpu, failing=True):
    """Commit 13 lands; the reference passes it, XPU fails test_add there again."""
    upstream.add_commit(UPSTREAM, sha_of(13), parents=[sha_of(12)], message="change 13")
    newer = UpstreamCommitFactory(sha=sha_of(13), landed_at=nightly["commits"][-1].landed_at + timedelta(minutes=1))
    ran(nightly["reference"], newer)
    ran(xpu, newer, "failure", [named("XPU", "xpu")]) if failing else ran(xpu, newer)
    store_sweep(timezone.now())
    return newer.sha


def test_a_failure_still_red_later_is_bisected_from_its_first_failing_commit(nightly, upstream, xpu):
    fail_on_newest(nightly, xpu)
    bisection = bisection_consider(xpu.pk, _one_more(nightly, upstream, xpu))
    assert (bisection.good_sha, bisection.bad_sha) == (sha_of(0), sha_of(12))
    assert bisection.commits == [sha_of(n) for n in range(1, 13)]


def test_a_failure_red_since_the_commit_after_its_last_pass_is_not_bisected_when_seen_again(nightly, upstream, xpu):
    ran(xpu, nightly["commits"][11])
    ran(nightly["reference"], nightly["commits"][11])
    fail_on_newest(nightly, xpu)
    assert bisection_consider(xpu.pk, _one_more(nightly, upstream, xpu)) is None
