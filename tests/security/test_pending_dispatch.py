"""Decision: a callback for a dispatch the relay has not recorded as sent (`pending`, `sending`,
`retrying`) is accepted. The row's state lags what GitHub did: a send that timed out on our side
may have been delivered, and a fast runner can call back before the sender records `sent`.
Trust comes from the caller's identity and the callback_token (signed over delivery, repo, PR and
head, and only ever handed out inside a dispatch), not from the row's state; the queue time stays
unknown rather than invented."""

import json

import pytest

from relay.dispatch.sending import dispatch_client_payload
from relay.models import JobRun
from tests.conftest import action_body
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("state", ["pending", "sending", "retrying"])
def test_a_bound_callback_for_a_dispatch_not_yet_recorded_as_sent_is_accepted(client, oidc, state):
    project = ProjectFactory(full_name="intel/torch-xpu-ops", github_repo_id=123456, level="L4")
    dispatch = DispatchFactory(project=project, state=state, sent_at=None)
    body = action_body(dispatch_client_payload(dispatch), "in_progress")
    token = oidc.mint(repository=project.full_name, repository_id="123456")
    response = client.post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.json()["status"] == "in_progress"
    job = JobRun.objects.get()
    assert job.dispatch == dispatch and job.queue_seconds is None


def test_without_the_callback_token_an_l4_callback_is_still_refused_whatever_the_state(client, oidc):
    project = ProjectFactory(full_name="intel/torch-xpu-ops", github_repo_id=123456, level="L4")
    dispatch = DispatchFactory(project=project, state="pending")
    body = action_body(
        {k: v for k, v in dispatch_client_payload(dispatch).items() if k != "callback_token"}, "in_progress"
    )
    token = oidc.mint(repository=project.full_name, repository_id="123456")
    response = client.post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 403 and not JobRun.objects.exists()
