"""The results sweeper: timed out, never started, superseded — each visible as a result."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.dispatch.results_sweep import results_sweep
from relay.models import JobRun, UsedToken
from tests.factories import DeliveryFactory, DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db
HOURS = timedelta(hours=1)


def job(dispatch, **fields):
    defaults = {
        "project": dispatch.project,
        "dispatch": dispatch,
        "delivery_key": dispatch.delivery.guid,
        "run_id": "1",
        "workflow_name": "ci",
        "status": "in_progress",
        "in_progress_at": timezone.now(),
        "head_sha": dispatch.head_sha,
        "pr_number": dispatch.pr_number,
    }
    return JobRun.objects.create(**{**defaults, **fields})


def test_a_job_in_progress_past_six_hours_times_out_with_its_execution_time():
    stuck = job(DispatchFactory(state="sent", sent_at=timezone.now()), in_progress_at=timezone.now() - 7 * HOURS)
    fresh = job(DispatchFactory(state="sent", sent_at=timezone.now()), in_progress_at=timezone.now() - 1 * HOURS)
    assert results_sweep().timed_out == 1
    stuck.refresh_from_db()
    assert (stuck.status, stuck.conclusion, stuck.ended_by) == ("completed", "timed_out", "timed_out")
    assert stuck.execution_seconds >= 7 * 3600
    fresh.refresh_from_db()
    assert fresh.status == "in_progress"


def test_a_sent_dispatch_without_any_callback_becomes_never_started_once():
    dispatch = DispatchFactory(state="sent", sent_at=timezone.now() - 7 * HOURS)
    DispatchFactory(state="sent", sent_at=timezone.now() - 7 * HOURS, project=ProjectFactory(level="L1"))
    assert results_sweep().never_started == 1
    assert results_sweep().never_started == 0
    row = JobRun.objects.get()
    assert (row.dispatch, row.ended_by, row.conclusion) == (dispatch, "never_started", "timed_out")


def test_a_late_first_callback_replaces_the_never_started_row(client):
    from relay.callbacks.body import report_read
    from relay.callbacks.receive import Answer, _job_apply, _job_key, _job_new
    from relay.dispatch.sending import dispatch_client_payload
    from tests.conftest import action_body

    dispatch = DispatchFactory(state="sent", sent_at=timezone.now() - 7 * HOURS)
    results_sweep()
    report = report_read(action_body(dispatch_client_payload(dispatch), "in_progress"))
    answer = Answer(dispatch.project, report, looked_up=dispatch)
    new_row = _job_new(answer, _job_key(dispatch.project, report))
    assert _job_apply(report, new_row, dispatch) is not None
    assert list(JobRun.objects.values_list("ended_by", flat=True)) == [""]


def test_unfinished_jobs_of_an_older_pr_head_are_superseded():
    old = DispatchFactory(state="sent", sent_at=timezone.now(), head_sha="a" * 40, delivery__head_sha="a" * 40)
    DeliveryFactory(pr_number=old.pr_number, head_sha="b" * 40, received_at=timezone.now() + timedelta(seconds=5))
    stale = job(old)
    assert results_sweep().superseded == 1
    stale.refresh_from_db()
    assert (stale.conclusion, stale.ended_by) == ("cancelled", "superseded")


def test_of_two_sweeps_racing_each_announces_only_the_jobs_it_ended(monkeypatch):
    """The other sweep ends one of the stale jobs between this sweep's read and its write."""
    import relay.dispatch.results_sweep as sweeper

    old = DispatchFactory(state="sent", sent_at=timezone.now(), head_sha="a" * 40, delivery__head_sha="a" * 40)
    DeliveryFactory(pr_number=old.pr_number, head_sha="b" * 40, received_at=timezone.now() + timedelta(seconds=5))
    theirs, ours = job(old, run_id="1"), job(old, run_id="2")
    heads = sweeper.pr_heads_newest

    def heads_while_the_other_sweep_ends_one(numbers):
        JobRun.objects.filter(pk=theirs.pk).update(status="completed", ended_by="superseded")
        return heads(numbers)

    announced = []
    monkeypatch.setattr(sweeper, "pr_heads_newest", heads_while_the_other_sweep_ends_one)
    monkeypatch.setattr(sweeper.follow_up, "job_recorded", announced.append)
    assert results_sweep().superseded == 1
    assert announced == [ours.pk]


def test_a_silent_dispatch_of_an_older_head_counts_as_superseded_not_never_started():
    DispatchFactory(state="sent", sent_at=timezone.now() - 7 * HOURS, head_sha="a" * 40, delivery__head_sha="a" * 40)
    DeliveryFactory(pr_number=2, head_sha="c" * 40, received_at=timezone.now())
    results_sweep()
    assert JobRun.objects.get().ended_by == "superseded"


def test_expired_token_ids_are_pruned():
    UsedToken.objects.create(issuer="i", jti="old", expires_at=timezone.now() - HOURS, used_for="x")
    UsedToken.objects.create(issuer="i", jti="new", expires_at=timezone.now() + HOURS, used_for="x")
    assert results_sweep().tokens_pruned == 1
    assert list(UsedToken.objects.values_list("jti", flat=True)) == ["new"]
