"""Quarantine = mute: made, extended and lifted with an audit row each; a muted test still shows
but is left out of the backend's pass rate and the merge gate; an xpassed test the backend
expects to fail reads "now passes — lift the expectation"."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.models import TestMuteEvent, identity_digest
from relay.results.excused import excused_jobs
from relay.triage import mutes
from relay.triage.expectations import expectations_replace
from relay.triage.mutes import MuteError

from .conftest import XPU_ADDMM, XPU_SUM, result

pytestmark = pytest.mark.django_db
ADDMM = "test_ops.TestCommon.test_addmm_float32"


def mute(backends, test=ADDMM, **fields):
    return mutes.mute_create(backends["xpu"], test, "upstream fix in #150001", "xpu-oncall", "alice", **fields)


def test_a_mute_lasts_fourteen_days_by_default_and_is_audited(backends):
    made = mute(backends)
    assert timedelta(days=13, hours=23) < made.expires_at - timezone.now() <= timedelta(days=14)
    assert list(TestMuteEvent.objects.values_list("action", "by")) == [("muted", "alice")]


def test_it_is_extended_and_lifted_each_with_its_audit_row(backends):
    made = mute(backends)
    mutes.mute_extend(made, "bob", days=30, note="fix slipped")
    mutes.mute_lift(made, "carol")
    made.refresh_from_db()
    assert made.lifted_by == "carol" and not made.active_at(timezone.now())
    assert list(made.events.values_list("action", "by")) == [
        ("muted", "alice"),
        ("extended", "bob"),
        ("lifted", "carol"),
    ]
    with pytest.raises(MuteError, match="lifted already"):
        mutes.mute_lift(made, "carol")


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"days": 91}, "at most 90 days"),
        ({"expires_at": timezone.now() - timedelta(days=1)}, "in the future"),
    ],
)
def test_an_expiry_out_of_bounds_is_refused(backends, fields, message):
    with pytest.raises(MuteError, match=message):
        mute(backends, **fields)


def test_a_test_is_muted_once_per_backend_and_a_name_that_is_no_test_is_refused(backends):
    mute(backends)
    with pytest.raises(MuteError, match="already muted"):
        mute(backends)
    with pytest.raises(MuteError, match="not a test id"):
        mute(backends, test="intel/torch-xpu-ops")
    assert mutes.mute_create(backends["rocm"], ADDMM, "r", "o", "alice")  # another backend's own mute


def test_a_job_failing_only_muted_tests_does_not_block_the_gate(backends):
    from relay.checks.gate import gate_summary
    from relay.results.gate import gate_verdict

    result(backends["xpu"], "e" * 40, [XPU_ADDMM], pr_number=4242)
    assert gate_verdict(4242, "e" * 40)["state"] == "failure"
    mute(backends)
    verdict = gate_verdict(4242, "e" * 40)
    assert verdict["state"] == "success"
    assert f"failed with {ADDMM} muted until" in verdict["backends"][0]["reason"]
    assert "tests the backend muted" in gate_summary(verdict)


def test_a_muted_failure_beside_another_still_blocks(backends):
    from relay.results.gate import gate_verdict

    mute(backends)
    result(backends["xpu"], "e" * 40, [XPU_ADDMM, XPU_SUM], pr_number=4242)
    assert gate_verdict(4242, "e" * 40)["state"] == "failure"


def test_a_job_failing_only_muted_tests_is_left_out_of_the_pass_rate_until_the_mute_is_lifted(backends, trunk):
    result(backends["ref"], trunk[0].sha)
    result(backends["xpu"], trunk[0].sha, [XPU_ADDMM])
    since = timezone.now() - timedelta(days=1)
    assert excused_jobs(backends["xpu"], since) == []
    made = mute(backends)
    (excused,) = excused_jobs(backends["xpu"], since)
    assert excused.reason == "muted" and excused.evidence[0].url == f"/test/{ADDMM}"
    mutes.mute_lift(made, "alice")
    assert excused_jobs(backends["xpu"], since) == []


def test_an_xpassed_test_the_backend_expects_to_fail_reads_now_passes_lift_the_expectation(backends, trunk):
    from relay.results.baseline import commit_baseline

    expectations_replace(backends["xpu"], "TestCommon.test_addmm*,Fail\n", by="alice")
    result(backends["ref"], trunk[0].sha)
    result(backends["xpu"], trunk[0].sha, [{**XPU_ADDMM, "outcome": "xpassed"}])
    (test,) = commit_baseline(trunk[0].sha).for_backend(backends["xpu"].id).known
    assert test.known_label == "now passes — lift the expectation (TestCommon.test_addmm*)"
    assert test.kind == "backend_only" and test.known_as == "expected"  # accounted for, not a regression


# --- a mute covers one test, never a job (issue 52 item 2) -------------------------------------------


@pytest.mark.parametrize("conclusion", ["failure", "timed_out", "cancelled"])
def test_a_mute_on_a_job_label_hides_no_build_break_time_out_or_cancellation_from_the_gate(backends, conclusion):
    """A job's label once stored as an identity, muted: the gate read the job's break as excused."""
    from relay.models import TestIdentity, TestMute
    from relay.results.gate import gate_verdict

    label = "ci / test (default, 1, 1)"
    identity = TestIdentity.objects.create(identity=label, digest=identity_digest(label))
    TestMute.objects.create(
        identity=identity, project=backends["xpu"], reason="r", owner="o", created_by="alice",
        expires_at=timezone.now() + timedelta(days=7),
    )  # fmt: skip
    result(backends["xpu"], "e" * 40, conclusion=conclusion, pr_number=4242, tests_total=None)
    assert gate_verdict(4242, "e" * 40)["state"] == "failure"


@pytest.mark.parametrize("label", ["test / build", "ci / test (default, 1, 1)", "xpu-ci / test"])
def test_a_job_label_cannot_be_muted_even_once_stored_as_an_identity(backends, label):
    from relay.models import TestIdentity

    TestIdentity.objects.get_or_create(identity=label, digest=identity_digest(label))
    with pytest.raises(MuteError, match="not a test id"):
        mute(backends, test=label)
    assert not mutes.mutable(label) and not mutes.Mutes([backends["xpu"].pk]).of(backends["xpu"].pk, label)


# --- a backend that mutes only with a tracking issue ------------------------------------------------


TRACKER = "https://github.com/intel/torch-xpu-ops/issues/4961"


def test_a_backend_that_asks_for_a_tracking_issue_refuses_a_mute_without_one(backends):
    backends["xpu"].mute_needs_issue = True
    with pytest.raises(MuteError, match="only with its tracking issue"):
        mute(backends)
    assert mute(backends, tracking_issue=TRACKER).tracking_issue == TRACKER


def test_a_backend_that_does_not_ask_keeps_its_mutes_without_one(backends):
    assert mute(backends).tracking_issue == ""


@pytest.mark.parametrize("link", ["javascript:alert(1)", "github.com/x/y/issues/1", "https://", "x" * 600])
def test_a_tracking_issue_is_an_http_link(backends, link):
    with pytest.raises(MuteError, match="tracking issue"):
        mute(backends, tracking_issue=link)
