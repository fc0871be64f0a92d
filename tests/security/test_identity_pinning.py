"""Identity pinning: a GitHub project registered by name only (allowlist_import) is pinned to its
repository id on its first verified callback, with the id learnt from GitHub (the App's
installation repositories, through the stand-in), never from the token; afterwards any other id
is refused. A token from one kind of CI cannot speak for a project of another."""

import json

import pytest
from django.core.management import call_command
from django.utils import timezone

from relay.dispatch.sending import dispatch_client_payload
from relay.models import JobRun, Project
from tests.conftest import action_body
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db
REPO, REPO_ID = "pin-org/backend", 9100


@pytest.fixture
def imported(db, standin, oidc, tmp_path):
    standin.add_installation(installation_id=7, account="pin-org")
    standin.add_repo(REPO, repo_id=REPO_ID, installation_id=7)
    allowlist = tmp_path / "allowlist.yml"
    allowlist.write_text(f"L2:\n  - {REPO}\n")
    call_command("allowlist_import", str(allowlist))
    project = Project.objects.get(full_name=REPO)
    assert project.github_repo_id is None
    return project


def callback(client, oidc, project, repository_id: str, job: str = "build", **claims):
    dispatch = DispatchFactory(project=project, state="sent", sent_at=timezone.now())
    body = action_body(dispatch_client_payload(dispatch), "in_progress", job=job)
    token = oidc.mint(repository=project.full_name, repository_id=repository_id, **claims)
    return client.post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def test_the_first_verified_callback_pins_the_id_github_reports(client, oidc, imported):
    assert callback(client, oidc, imported, str(REPO_ID)).status_code == 200
    imported.refresh_from_db()
    assert imported.github_repo_id == REPO_ID


def test_after_pinning_a_recreated_repository_is_refused(client, oidc, imported):
    assert callback(client, oidc, imported, str(REPO_ID)).status_code == 200
    response = callback(client, oidc, imported, "66666", job="after")
    assert response.status_code == 403 and "renamed or recreated" in response.json()["detail"]


def test_the_first_caller_cannot_choose_the_pinned_id(client, oidc, imported):
    response = callback(client, oidc, imported, "66666")
    assert response.status_code == 403
    imported.refresh_from_db()
    assert imported.github_repo_id == REPO_ID and not JobRun.objects.exists()


def test_github_unreachable_while_pinning_is_a_503_and_pins_nothing(client, oidc, imported, standin):
    standin.fail("GET", r"/installation/repositories.*", status=502, times=None)
    response = callback(client, oidc, imported, str(REPO_ID))
    assert response.status_code == 503 and response["Retry-After"]
    imported.refresh_from_db()
    assert imported.github_repo_id is None


def test_a_repository_without_the_app_cannot_be_pinned(client, oidc, standin, db):
    standin.add_repo("nowhere/backend", repo_id=5555)
    project = ProjectFactory(full_name="nowhere/backend", github_repo_id=None, level="L2")
    response = callback(client, oidc, project, "5555")
    assert response.status_code == 403 and "cannot pin" in response.json()["detail"]


def test_a_github_actions_token_cannot_speak_for_a_gitlab_project(client, oidc, db):
    project = ProjectFactory(
        full_name="gl-org/torch-npu",
        level="L2",
        ci_provider="gitlab",
        gitlab_project_id="4002",
        gitlab_project_path="gl-org/torch-npu",
    )
    response = callback(client, oidc, project, str(project.github_repo_id))
    assert response.status_code == 403 and "GitLab CI" in response.json()["detail"]


def test_a_github_actions_token_cannot_speak_for_a_buildkite_project(client, oidc, db):
    org, pipeline = "018b5ec5-0000-4000-8000-000000000001", "018cdabc-0000-4000-8000-000000000002"
    project = ProjectFactory(
        full_name="vllm-project/vllm", level="L2", ci_provider="buildkite", buildkite_pipeline=f"{org}/{pipeline}"
    )
    response = callback(client, oidc, project, str(project.github_repo_id))
    assert response.status_code == 403 and "Buildkite" in response.json()["detail"]
