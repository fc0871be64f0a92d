"""The existing cross-repo-ci-relay-callback action must work against us with only its callback
URL changed: the same body (relay.md §7.2), sent the same way (§7.3: curl --fail-with-body,
10 s max time, no retries), and the step's exit code follows our status (≥ 400 fails it)."""

import json
import shutil
import subprocess

import pytest
from django.utils import timezone

from relay.dispatch.sending import dispatch_client_payload
from relay.models import JobRun
from tests.conftest import action_body
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not shutil.which("curl"), reason="curl is not installed"),
]
REPO, REPO_ID = "intel/torch-xpu-ops", 123456


def action_post(url: str, token: str, body: dict, tmp_path) -> subprocess.CompletedProcess:
    """What the action's report step does: the JSON on one line, from a file, with curl."""
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    command = [
        "curl",
        "-sS",
        "--fail-with-body",
        "--max-time",
        "10",
        "-X",
        "POST",
        "-H",
        "Content-Type: application/json",
        "-H",
        f"Authorization: Bearer {token}",
        "--data",
        f"@{path}",
        url.rstrip("/"),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=30)


@pytest.fixture
def payload(db):
    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")
    return dispatch_client_payload(DispatchFactory(project=project, state="sent", sent_at=timezone.now()))


def test_the_actions_requests_are_accepted_and_its_steps_stay_green(live_server, oidc, payload, tmp_path):
    url = f"{live_server.url}/github/callback/"
    for status, conclusion in (("in_progress", None), ("completed", "success")):
        token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
        result = action_post(url, token, action_body(payload, status, conclusion), tmp_path)
        assert result.returncode == 0, result.stderr + result.stdout
        assert json.loads(result.stdout) == {"ok": True, "status": status}
    job = JobRun.objects.get()
    assert (job.status, job.conclusion, job.run_id, job.run_attempt) == ("completed", "success", "4242", 1)


def test_a_rejected_callback_fails_the_step_with_curls_exit_22(live_server, oidc, payload, tmp_path):
    token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    action_post(f"{live_server.url}/github/callback", token, action_body(payload, "completed", "success"), tmp_path)
    again = action_post(
        f"{live_server.url}/github/callback",
        oidc.mint(repository=REPO, repository_id=str(REPO_ID)),
        action_body(payload, "in_progress"),
        tmp_path,
    )
    assert again.returncode == 22
    assert "already completed" in again.stdout


def test_an_unregistered_repo_is_answered_ignored_and_the_step_stays_green(live_server, oidc, payload, tmp_path):
    token = oidc.mint(repository="other/repo", repository_id="1")
    result = action_post(f"{live_server.url}/github/callback", token, action_body(payload, "in_progress"), tmp_path)
    assert result.returncode == 0
    assert json.loads(result.stdout)["status"] == "ignored"
