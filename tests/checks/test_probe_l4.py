"""The probe repo's label-gated L4 check (ciflow/crcr/crcr-test-L4), its jobs as the sandbox's
simulated pytorch/crcr-test runs them (devtools/standin/sandbox.py), through the real relay: the
plainly named version's failure blocks the merge gate, a job still running keeps it pending, the
sweeper ends the job that never completes as `timed_out` on its check run, and the expected-outcome
version passes once it has. Twenty relayed PRs with two failing raise the pass-rate alert."""

import pytest

from devtools.standin.sandbox import PROBE_L4_LABEL, JobPlan, probe_l4_naming
from relay.dispatch.sending import dispatch_client_payload
from relay.health.alerts import alerts_evaluate
from relay.models import AlertEpisode, Dispatch, NotificationEvent
from relay.results.gate import gate_verdict

from .conftest import HEAD
from .test_gate import gate, state

pytestmark = pytest.mark.django_db
PROBE = "pytorch/crcr-test"
EXPECTED_PR, PLAIN_PR = 170002, 170003


@pytest.fixture
def probe(relay):
    return relay.backend(PROBE, "L4", is_health_probe=True, hardware_kind="probe")


def probe_plan(probe, number: int, head: str) -> JobPlan:
    dispatch = Dispatch.objects.get(project=probe, pr_number=number, head_sha=head, state="sent")
    spec = {"full_name": probe.full_name, "is_health_probe": True, "github_repo_id": probe.github_repo_id}
    return JobPlan(spec, dispatch_client_payload(dispatch))


def run(relay, probe, number: int, head: str = HEAD, labels=(PROBE_L4_LABEL,), break_smoke: bool = False) -> list:
    """The probe's jobs for this PR as the sandbox plans them, each reported as its runner would."""
    relay.pr("opened", number=number, head=head, labels=labels)
    plan = probe_plan(probe, number, head)
    jobs = plan.jobs()
    for job in jobs:
        extra = {
            "name": job.get("workflow", "crcr"),
            "pr": number,
            "head": head,
            "job": job["name"],
            "run_id": plan.run_id,
        }
        relay.report(probe, "in_progress", **extra)
        if not job["hangs"]:
            failed = break_smoke and job["name"] == "smoke"
            relay.report(probe, "completed", "failure" if failed else job["conclusion"], **extra)
    return jobs


def test_the_plainly_named_l4_probes_failure_blocks_the_merge_gate(relay, probe):
    assert probe_l4_naming(PLAIN_PR) == "plain"
    run(relay, probe, PLAIN_PR)
    blocked = gate(relay)
    assert (state(blocked), blocked["output"]["title"]) == ("failure", f"Blocked: {PROBE} failed")
    [entry] = gate_verdict(PLAIN_PR)["backends"]
    # by the probe rule: a plainly named job that did not succeed failed, whatever its conclusion
    assert entry["reason"] == "crcr-test-L4 / test-L4-cancel failure, crcr-test-L4 / test-L4-failure failure"
    failing = relay.check_run(f"crcr/{PROBE}/crcr-test-L4/test-L4-failure")
    assert failing["conclusion"] == "failure"


def test_a_pending_l4_probe_job_keeps_the_gate_pending(relay, probe):
    assert probe_l4_naming(EXPECTED_PR) == "expected"
    jobs = run(relay, probe, EXPECTED_PR)
    assert [j["name"] for j in jobs if j["hangs"]] == ["test-L4-xtimeout"]
    waiting = gate(relay)
    assert (state(waiting), waiting["output"]["title"]) == ("in_progress", "Waiting for 1 of 1 L4 backend")
    assert relay.check_run(f"crcr/{PROBE}/crcr-test-L4/test-L4-xtimeout")["status"] == "in_progress"


def test_the_sweeper_ends_the_never_completing_l4_job_as_timed_out_and_the_expected_version_then_passes(relay, probe):
    run(relay, probe, EXPECTED_PR)
    relay.sweep_results(hours_later=7)
    timed_out = gate(relay) and relay.check_run(f"crcr/{PROBE}/crcr-test-L4/test-L4-xtimeout")
    assert (timed_out["status"], timed_out["conclusion"]) == ("completed", "timed_out")
    assert timed_out["output"]["title"].startswith("Timed out: no completion within 6 h")
    assert state(gate(relay)) == "success", "every x-probe ended as built: the relay works"


def test_the_sweeper_ends_the_plain_timeout_job_as_timed_out_and_the_gate_stays_blocked(relay, probe):
    run(relay, probe, PLAIN_PR)
    relay.sweep_results(hours_later=7)
    relay.drain()
    timed_out = relay.check_run(f"crcr/{PROBE}/crcr-test-L4/test-L4-timeout")
    assert (timed_out["status"], timed_out["conclusion"]) == ("completed", "timed_out")
    blocked = gate(relay)
    assert state(blocked) == "failure" and "test-L4-timeout failure" in gate_verdict(PLAIN_PR)["backends"][0]["reason"]


def test_two_failing_probe_prs_of_the_last_twenty_raise_the_pass_rate_alert(relay, probe, settings):
    settings.CRCR_CALLBACK_RATE_PER_MIN = 10_000  # 160 callbacks in a few seconds
    for n in range(20):
        run(relay, probe, 171000 + 2 * n, head=f"{n:040x}", labels=(), break_smoke=n in (4, 11))
    [reading] = [r for r in alerts_evaluate() if r.rule == AlertEpisode.Rule.PROBE_PR_PASS_RATE]
    assert reading.firing and reading.value == pytest.approx(0.9)
    assert "#171008" in reading.summary and "#171022" in reading.summary
    [event] = NotificationEvent.objects.filter(kind="health_degraded", details__rule="probe_pr_pass_rate")
    assert "probe passed 18 of the last 20 relayed PRs (90%)" in event.title
