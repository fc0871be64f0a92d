"""Retention: old webhook payloads and callback bodies are cut down by a beat task on a
configurable schedule, while every result — deliveries, dispatches, attempts, job runs, failed
tests — stays; and the echoed callback_token is never stored at all."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from crcr.celery import app
from relay.dispatch.fan_out import ResendRefused, dispatches_resend
from relay.dispatch.sending import dispatch_client_payload
from relay.intake.commits import commits_record
from relay.models import Delivery, DispatchAttempt, FailedTest, JobRun
from relay.ops.retention import retention_sweep
from relay.results.heads import pr_labels
from tests.conftest import action_body
from tests.factories import DeliveryFactory, DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db
BIG = "x" * 1_000_000


def pr_payload(labels=("ciflow/crcr/xpu",)) -> dict:
    return {
        "action": "labeled",
        "number": 42,
        "blob": BIG,
        "repository": {"full_name": "pytorch/pytorch"},
        "pull_request": {
            "number": 42,
            "title": BIG,
            "head": {"sha": "ab" * 20, "ref": "feature"},
            "labels": [{"name": n} for n in labels],
        },
    }


@pytest.fixture
def old(db):
    now = timezone.now()
    delivery = DeliveryFactory(
        event="pull_request",
        action="labeled",
        pr_number=42,
        head_sha="ab" * 20,
        payload=pr_payload(),
        received_at=now - timedelta(days=40),
    )
    commits_record("pull_request", delivery.payload, delivery.received_at)
    dispatch = DispatchFactory(delivery=delivery, state="sent", attempts=1)
    DispatchAttempt.objects.create(dispatch=dispatch, number=1, outcome="sent", status_code=204)
    job = JobRun.objects.create(
        project=dispatch.project,
        dispatch=dispatch,
        delivery_key=delivery.guid,
        run_id="1",
        workflow_name="ci",
        status="completed",
        conclusion="failure",
        tests_failed=1,
        tests_total=9,
        completed_at=now - timedelta(days=40),
        body={"workflow": {"name": "ci", "log": BIG}},
    )
    FailedTest.objects.create(job_run=job, name="test_add", message="boom")
    return delivery, dispatch, job


def test_old_payloads_and_bodies_are_cut_and_every_result_stays(old):
    delivery, dispatch, job = old
    assert retention_sweep() == {"payloads": 1, "bodies": 1, "test_runs": 0}
    delivery.refresh_from_db()
    job.refresh_from_db()
    assert delivery.payload_pruned_at is not None and len(json.dumps(delivery.payload)) < 500
    assert delivery.payload["pull_request"]["labels"] == [{"name": "ciflow/crcr/xpu"}] and pr_labels(42) == {
        "ciflow/crcr/xpu"
    }
    assert job.body == {} and (job.conclusion, job.tests_failed, job.tests_total) == ("failure", 1, 9)
    assert FailedTest.objects.filter(job_run=job, name="test_add").exists()
    assert (
        DispatchAttempt.objects.filter(dispatch=dispatch).count() == 1
        and Delivery.objects.filter(pk=delivery.pk).exists()
    )
    assert retention_sweep() == {"payloads": 0, "bodies": 0, "test_runs": 0}


def test_recent_rows_and_deliveries_still_to_send_keep_everything(old, settings):
    now = timezone.now()
    fresh = DeliveryFactory(payload=pr_payload(), received_at=now - timedelta(days=2))
    waiting = DeliveryFactory(payload=pr_payload(), received_at=now - timedelta(days=40))
    DispatchFactory(delivery=waiting, state="retrying")
    running = JobRun.objects.create(
        project=old[2].project, delivery_key="d", run_id="2", workflow_name="ci", status="in_progress", body={"a": BIG}
    )
    retention_sweep()
    for kept in (fresh, waiting):
        kept.refresh_from_db()
        assert kept.payload_pruned_at is None and kept.payload["blob"] == BIG
    running.refresh_from_db()
    assert running.body == {"a": BIG}


def test_retention_is_configurable_and_zero_keeps_forever(old, settings):
    settings.CRCR_RETENTION_PAYLOAD_DAYS = 0
    settings.CRCR_RETENTION_CALLBACK_BODY_DAYS = 60
    assert retention_sweep() == {"payloads": 0, "bodies": 0, "test_runs": 0}
    settings.CRCR_RETENTION_CALLBACK_BODY_DAYS = 10
    assert retention_sweep() == {"payloads": 0, "bodies": 1, "test_runs": 0}


def test_a_pruned_delivery_cannot_be_re_dispatched(old):
    delivery, dispatch, _ = old
    retention_sweep()
    delivery.refresh_from_db()
    with pytest.raises(ResendRefused):
        dispatches_resend(delivery, [dispatch.project], by="op")


def test_the_beat_schedule_runs_the_retention_task():
    entries = {entry["task"]: entry["schedule"] for entry in app.conf.beat_schedule.values()}
    assert entries["relay.retention_sweep"] == 6 * 3600.0
    from relay import tasks

    assert tasks.retention_sweep_task.name == "relay.retention_sweep"


def test_the_echoed_callback_token_is_never_stored(client, oidc):
    project = ProjectFactory(full_name="intel/torch-xpu-ops", github_repo_id=123456, level="L4")
    dispatch = DispatchFactory(project=project, state="sent", sent_at=timezone.now())
    body = action_body(dispatch_client_payload(dispatch), "in_progress")
    token = oidc.mint(repository=project.full_name, repository_id="123456")
    response = client.post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 200 and body["callback_token"]
    stored = JobRun.objects.get().body
    assert "callback_token" not in stored and body["callback_token"] not in json.dumps(stored)
