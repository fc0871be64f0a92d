"""Nightly and periodic self-reports carry no callback_token, so they land only where
self-reports belong: trunk commits and the nightly/periodic views, never a PR head's cell."""

import json

import pytest

from relay.models import JobRun, UpstreamCommit
from tests.conftest import UPSTREAM, UPSTREAM_ID, action_body
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db
PR_HEAD, TRUNK = "ab" * 20, "cd" * 20


@pytest.fixture
def l4(db, standin, oidc):
    standin.add_installation(installation_id=1, account="pytorch")
    standin.add_repo(UPSTREAM, repo_id=UPSTREAM_ID, installation_id=1)
    for sha in (PR_HEAD, TRUNK):
        standin.add_commit(UPSTREAM, sha, message="a commit")
    return ProjectFactory(full_name="l4-org/backend", github_repo_id=5150, level="L4")


def self_report(client, oidc, project, sha, event_type="nightly"):
    body = action_body(
        {"event_type": event_type, "delivery_id": sha, "payload": {}}, "completed", "success", job="nightly"
    )
    token = oidc.mint(repository=project.full_name, repository_id=str(project.github_repo_id))
    return client.post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


@pytest.mark.parametrize("event_type", ["nightly", "periodic"])
def test_a_self_report_naming_a_known_pr_head_is_refused(client, oidc, l4, event_type):
    UpstreamCommit.objects.create(sha=PR_HEAD, pr_number=77)
    response = self_report(client, oidc, l4, PR_HEAD, event_type)
    assert response.status_code == 403 and "head of an upstream PR" in response.json()["detail"]
    assert not JobRun.objects.exists()


def test_a_self_report_naming_a_dispatched_pr_head_is_refused(client, oidc, l4):
    DispatchFactory(project=l4, state="sent", pr_number=77, head_sha=PR_HEAD, event_type="pull_request")
    assert self_report(client, oidc, l4, PR_HEAD).status_code == 403


def test_a_self_report_on_trunk_is_accepted_and_shows_on_the_trunk_row(client, oidc, l4):
    UpstreamCommit.objects.create(sha=TRUNK, is_trunk=True, branch="main")
    assert self_report(client, oidc, l4, TRUNK).json()["status"] == "completed"
    assert "nightly" in client.get(f"/commit/{TRUNK}").content.decode()


def test_a_self_report_on_a_commit_that_later_becomes_a_pr_head_never_shows_on_the_pr(client, oidc, l4):
    from relay.results.cells import jobs_for_commits

    assert self_report(client, oidc, l4, PR_HEAD).json()["status"] == "completed"  # not yet known as a PR head
    UpstreamCommit.objects.create(sha=PR_HEAD, pr_number=77)
    assert jobs_for_commits([PR_HEAD], [l4.pk]) == []
    pr = client.get("/api/v1/prs/77").json()
    assert all(
        cell.get("state") in (None, "none", "not_dispatched", "no_results") or not cell.get("jobs")
        for head in pr.get("heads", [])
        for cell in head.get("cells", [])
    )
    assert "nightly" not in client.get("/pr/77").content.decode()


def test_a_self_report_keyed_by_a_dispatched_delivery_cannot_complete_that_dispatchs_job(client, oidc, l4):
    from relay.dispatch.sending import dispatch_client_payload

    UpstreamCommit.objects.create(sha=TRUNK, is_trunk=True, branch="main")
    dispatch = DispatchFactory(project=l4, state="sent", pr_number=77, head_sha=PR_HEAD, event_type="pull_request")
    token = oidc.mint(repository=l4.full_name, repository_id=str(l4.github_repo_id))
    started = action_body({**dispatch_client_payload(dispatch), "payload": {}}, "in_progress", job="nightly")
    posted = client.post(
        "/github/callback",
        data=json.dumps(started),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert posted.status_code == 200, posted.json()
    body = action_body(
        {"event_type": "nightly", "delivery_id": dispatch.delivery.guid, "pytorch_head_sha": TRUNK, "payload": {}},
        "completed",
        "success",
        job="nightly",
    )
    token = oidc.mint(repository=l4.full_name, repository_id=str(l4.github_repo_id))
    response = client.post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code == 403 and "names an upstream delivery" in response.json()["detail"]
    job = JobRun.objects.get()
    assert (job.dispatch, job.status, job.event_type) == (dispatch, "in_progress", "pull_request")
