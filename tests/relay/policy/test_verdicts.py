"""The one verdict policy."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from relay.policy.verdicts import State, cell_state, dispatch_cell_state, job_verdicts, rates

T0 = datetime(2026, 12, 1, tzinfo=UTC)


@dataclass
class Job:
    conclusion: str = "success"
    status: str = "completed"
    ended_by: str = ""
    run_id: str = "100"
    run_attempt: int = 1
    workflow_name: str = "ci"
    job_name: str = "build"
    created_at: datetime = T0


def test_the_latest_attempt_decides():
    verdicts = job_verdicts(
        [Job("success", run_attempt=1), Job("failure", run_attempt=2, created_at=T0 + timedelta(minutes=5))]
    )
    assert [v.state for v in verdicts] == [State.FAILURE]


def test_attempt_2_decides_even_when_a_late_attempt_1_arrives_after_it():
    attempt_2 = Job("success", run_attempt=2, created_at=T0)
    late_attempt_1 = Job("failure", run_attempt=1, created_at=T0 + timedelta(minutes=5))
    (verdict,) = job_verdicts([attempt_2, late_attempt_1])
    assert verdict.job is attempt_2 and verdict.state == State.FLAKY and verdict.first_attempt_state == State.FAILURE


def test_across_runs_the_run_first_seen_last_decides_whatever_its_attempt_number():
    old_run = [
        Job("failure", run_id="7", run_attempt=1, created_at=T0),
        Job("failure", run_id="7", run_attempt=2, created_at=T0 + timedelta(minutes=1)),
    ]
    redispatched = Job("success", run_id="9", run_attempt=1, created_at=T0 + timedelta(minutes=2))
    (verdict,) = job_verdicts([*old_run, redispatched])
    assert verdict.job is redispatched and verdict.attempts == 3


def test_a_pass_after_a_failed_attempt_is_flaky_not_red():
    verdicts = job_verdicts([Job("failure"), Job("success", run_attempt=2, created_at=T0 + timedelta(minutes=5))])
    assert verdicts[0].state == State.FLAKY and verdicts[0].first_attempt_state == State.FAILURE


def test_superseded_work_counts_nowhere():
    verdicts = job_verdicts([Job("cancelled", ended_by="superseded")])
    assert verdicts[0].state == State.SUPERSEDED
    assert rates(verdicts).decided == 0
    assert cell_state([State.SUPERSEDED, State.SUCCESS]) == State.SUCCESS
    assert cell_state([State.SUPERSEDED]) == State.SUPERSEDED


def test_a_timeout_is_an_infrastructure_failure_and_a_dispatch_nobody_answered_is_no_job():
    verdicts = job_verdicts(
        [Job("timed_out", ended_by="timed_out"), Job("timed_out", ended_by="never_started", job_name="x")]
    )
    assert {v.state for v in verdicts} == {State.TIMED_OUT, State.NEVER_STARTED}
    assert rates(verdicts).infra == 1 and rates(verdicts).decided == 1 and rates(verdicts).pass_rate == 0


def test_a_failure_outranks_everything_in_a_cell():
    assert cell_state([State.SUCCESS, State.RUNNING, State.FAILURE, State.FLAKY]) == State.FAILURE
    assert cell_state([State.SUCCESS, State.RUNNING]) == State.RUNNING
    assert cell_state([State.SUCCESS, State.FLAKY]) == State.FLAKY
    assert cell_state([]) == State.NO_RESULT


def test_l1_cells_show_dispatch_outcomes_only():
    assert dispatch_cell_state(["sent"]) == State.DISPATCHED
    assert dispatch_cell_state(["not_installed"]) == State.NOT_INSTALLED
    assert dispatch_cell_state(["failed"]) == State.DISPATCH_FAILED
    assert dispatch_cell_state(["retrying"]) == State.DISPATCH_PENDING


def test_pass_rates_use_latest_attempts_and_report_first_attempt_rate_beside():
    jobs = [
        Job("failure", job_name="a"),
        Job("success", job_name="a", run_attempt=2, created_at=T0 + timedelta(minutes=1)),
        Job("success", job_name="b"),
        Job("failure", job_name="c"),
        Job(status="in_progress", conclusion="", job_name="d"),
    ]
    result = rates(job_verdicts(jobs))
    assert (result.passed, result.failed, result.pending) == (2, 1, 1)
    assert result.pass_rate == 2 / 3 and result.first_attempt_pass_rate == 1 / 3


def test_the_health_probe_passes_only_on_its_expected_conclusions():
    """pytorch/crcr-test's convention (reference/hud.md): xfail, xcancel, xtimeout in the job name."""
    jobs = [
        Job("failure", job_name="l2-xfail"),
        Job("cancelled", job_name="l2-xcancel"),
        Job("timed_out", job_name="l2-xtimeout"),
        Job("success", job_name="ok"),
        Job("success", job_name="L3 XCANCEL (probe)"),
        Job("failure", job_name="l4-xtimeout"),
        Job("timed_out", job_name="smoke"),
    ]
    states = {v.job.job_name: v.state for v in job_verdicts(jobs, probe=True)}
    assert states == {
        "l2-xfail": State.SUCCESS,
        "l2-xcancel": State.SUCCESS,
        "l2-xtimeout": State.SUCCESS,
        "ok": State.SUCCESS,
        "L3 XCANCEL (probe)": State.FAILURE,
        "l4-xtimeout": State.FAILURE,
        "smoke": State.FAILURE,
    }


def test_an_xtimeout_probe_ended_by_the_sweeper_passes():
    swept = Job("timed_out", job_name="xtimeout", ended_by="timed_out")
    assert [v.state for v in job_verdicts([swept], probe=True)] == [State.SUCCESS]


def test_the_probe_convention_applies_to_the_probe_repo_only():
    assert [v.state for v in job_verdicts([Job("failure", job_name="test-xfail")])] == [State.FAILURE]
