"""A probe leaves as a repository_dispatch of the event type the backend listens for, naming the
commit, the bisection and the tests to run; it comes back as ordinary callbacks bound by its
callback_token, and the callback moves the bisection."""

import pytest

from relay.bisect.search import bisection_advance
from relay.dispatch.sending import dispatch_send
from relay.models import BISECT_EVENT, BisectProbe, JobRun
from tests.conftest import action_body, callback_sender

from .conftest import ADD, JOB, bisection_of, failed_add, sha_of

pytestmark = pytest.mark.django_db
REPO, REPO_ID = "intel/torch-xpu-ops", 123456


@pytest.fixture
def sent(standin, xpu):
    standin.add_installation(installation_id=11, account="intel")
    standin.add_repo(REPO, repo_id=REPO_ID, installation_id=11)
    xpu.github_repo_id, xpu.bisect_event_type = REPO_ID, "xpu-bisect"
    xpu.save()
    bisection = bisection_of(xpu, 12)
    bisection_advance(bisection.pk)
    probe = BisectProbe.objects.get()
    assert dispatch_send(probe.dispatch_id) == "sent"
    return standin.world.dispatches[-1]


@pytest.fixture
def call(client, oidc):
    return callback_sender(client, oidc, REPO, REPO_ID)


def test_the_dispatch_names_the_commit_the_bisection_and_the_tests(sent):
    payload = sent["client_payload"]
    assert sent["event_type"] == "xpu-bisect"
    assert (payload["event_type"], payload["payload"]["head_sha"]) == (BISECT_EVENT, sha_of(6))
    probe = BisectProbe.objects.get()
    assert payload["delivery_id"] == f"bisect-{probe.bisection_id}-1" and payload["callback_token"]
    assert payload["bisect"] == {
        "id": probe.bisection_id,
        "probe": 1,
        "role": "search",
        "sha": sha_of(6),
        "tests": [{"test_id": ADD, "job": JOB}],
        "jobs": [JOB],
    }


def test_its_callbacks_are_bound_by_its_token_and_move_the_bisection(sent, call, django_capture_on_commit_callbacks):
    payload = sent["client_payload"]
    assert call(action_body(payload, "in_progress")).status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        done = call(
            action_body(
                payload, "completed", "failure", test_results={"failed": 1, "total": 1}, failed_tests=[failed_add()]
            )
        )
    assert done.status_code == 200, done.content
    job = JobRun.objects.get()
    assert (job.event_type, job.head_sha, job.dispatch.probe.number) == (BISECT_EVENT, sha_of(6), 1)
    first, second = BisectProbe.objects.order_by("number")
    assert first.outcome == "fail" and (second.sha, second.outcome) == (sha_of(3), "")


def test_a_callback_for_another_commit_than_the_probe_s_is_refused(sent, call):
    body = action_body({**sent["client_payload"], "payload": {"head_sha": sha_of(7)}}, "in_progress")
    assert call(body).status_code == 403
    assert not JobRun.objects.exists()


def test_a_probe_s_job_is_the_bisection_s_whatever_event_type_its_report_says(sent, call):
    body = action_body({**sent["client_payload"], "event_type": "push"}, "completed", "success")
    assert call(body).status_code == 200
    assert JobRun.objects.get().event_type == BISECT_EVENT


def test_a_self_report_cannot_take_a_probe_s_delivery_id(sent, call):
    body = action_body(
        {**sent["client_payload"], "event_type": "nightly", "callback_token": ""}, "completed", "success"
    )
    body["delivery_id"] = "bisect-999-1"
    assert call(body).status_code == 403
    assert not JobRun.objects.exists()
