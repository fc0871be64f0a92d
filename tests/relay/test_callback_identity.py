"""The forged-token matrix: every token the relay must refuse, and the identities it maps."""

import json
import time

import pytest
from django.utils import timezone

from relay.dispatch.sending import dispatch_client_payload
from relay.models import JobRun
from tests.conftest import action_body
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db
REPO, REPO_ID = "intel/torch-xpu-ops", 123456


@pytest.fixture
def body(db):
    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")
    return action_body(
        dispatch_client_payload(DispatchFactory(project=project, state="sent", sent_at=timezone.now())), "in_progress"
    )


@pytest.fixture
def post(client, oidc):
    def send(body, token):
        headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token is not None else {}
        return client.post("/github/callback", data=json.dumps(body), content_type="application/json", **headers)

    return send


def good(oidc, **overrides):
    return oidc.mint(**{"repository": REPO, "repository_id": str(REPO_ID), **overrides})


def test_a_well_formed_github_token_is_accepted(post, body, oidc):
    assert post(body, good(oidc)).status_code == 200


def test_a_bare_token_without_the_bearer_prefix_is_accepted(client, body, oidc):
    response = client.post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=good(oidc)
    )
    assert response.status_code == 200


@pytest.mark.parametrize(
    "forge, needle",
    [
        (lambda o: None, "missing authorization token"),
        (lambda o: "not-a-jwt", "malformed"),
        (lambda o: good(o, audience="https://github.com/intel"), "audience"),
        (lambda o: good(o, iss="https://token.actions.githubusercontent.com"), "untrusted OIDC issuer"),
        (lambda o: good(o, iss=o.issuer("github") + "-evil"), "untrusted OIDC issuer"),
        (lambda o: good(o, alg="none"), "algorithm"),
        (lambda o: good(o, alg="HS256"), "algorithm"),
        (lambda o: good(o, lifetime=-120), "expired"),
        (lambda o: good(o, nbf=int(time.time()) + 3600), "not yet valid"),
        (lambda o: good(o, iat=int(time.time()) + 3600), "not yet valid"),
        (lambda o: good(o, key="unknown"), "no key"),
        (lambda o: good(o, omit=("jti",)), "jti"),
        (lambda o: good(o, omit=("exp",)), "exp"),
        (lambda o: good(o, omit=("repository",)), "repository"),
    ],
    ids=[
        "missing",
        "garbage",
        "wrong-aud",
        "real-github-issuer-not-configured",
        "wrong-iss",
        "alg-none",
        "hs256-with-public-key",
        "expired",
        "nbf-future",
        "iat-future",
        "unknown-kid",
        "no-jti",
        "no-exp",
        "no-repository",
    ],
)
def test_a_forged_or_broken_token_is_refused_with_401(post, body, oidc, forge, needle):
    response = post(body, forge(oidc))
    assert response.status_code == 401, response.content
    assert needle.lower() in response.json()["detail"].lower()
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert not JobRun.objects.exists()


def test_a_token_signed_by_a_rotated_in_key_is_accepted(post, body, oidc):
    assert post(body, good(oidc)).status_code == 200
    oidc.rotate()
    body["workflow"]["job_name"] = "after-rotation"
    assert post(body, good(oidc)).status_code == 200, "an unknown kid refetches the JWKS once"


def test_a_recreated_repo_with_another_id_is_refused_with_403(post, body, oidc):
    response = post(body, good(oidc, repository_id="999"))
    assert response.status_code == 403
    assert "renamed or recreated" in response.json()["detail"]


def test_an_unreachable_key_server_answers_503_not_401(post, body, oidc, settings):
    from relay.callbacks import oidc as relay_oidc

    token = good(oidc)
    settings.CRCR_OIDC_ISSUERS = [{**i, "jwks_uri": "http://127.0.0.1:9/jwks"} for i in oidc.issuers_config()]
    relay_oidc.reset_clients()
    response = post(body, token)
    assert response.status_code == 503
    assert response["Retry-After"]


def test_jwks_is_found_through_the_discovery_document_when_not_configured(post, body, oidc, settings):
    from relay.callbacks import oidc as relay_oidc

    settings.CRCR_OIDC_ISSUERS = [{"issuer": i["issuer"], "kind": i["kind"]} for i in oidc.issuers_config()]
    relay_oidc.reset_clients()
    assert post(body, good(oidc)).status_code == 200


@pytest.fixture
def vllm(db):
    return ProjectFactory(
        full_name="vllm-project/vllm",
        level="L2",
        ci_provider="buildkite",
        buildkite_pipeline="018b5ec5-0000-4000-8000-000000000001/018cdabc-0000-4000-8000-000000000002",
        oidc_required_claims={"build_branch": ["main"]},
    )


def buildkite(oidc, **claims):
    return oidc.mint(
        kind="buildkite",
        organization_id="018b5ec5-0000-4000-8000-000000000001",
        pipeline_id="018cdabc-0000-4000-8000-000000000002",
        **claims,
    )


def test_a_buildkite_pipeline_maps_to_its_repo_by_uuid(post, vllm, oidc):
    dispatch = DispatchFactory(project=vllm, state="sent", sent_at=timezone.now())
    body = action_body(dispatch_client_payload(dispatch), "in_progress", run_id="018f2c3a-1b2c-4d5e-8f90-0123456789ab")
    assert post(body, buildkite(oidc)).json()["status"] == "in_progress"
    assert JobRun.objects.get().project == vllm


def test_a_buildkite_fork_branch_cannot_report_as_the_repo(post, vllm, oidc):
    dispatch = DispatchFactory(project=vllm, state="sent", sent_at=timezone.now())
    response = post(
        action_body(dispatch_client_payload(dispatch), "in_progress"), buildkite(oidc, build_branch="attacker:main")
    )
    assert response.status_code == 403
    assert "build_branch" in response.json()["detail"]


def test_an_unregistered_buildkite_pipeline_is_refused_with_403(post, body, oidc):
    response = post(body, oidc.mint(kind="buildkite"))
    assert response.status_code == 403
    assert "not registered" in response.json()["detail"]


def test_a_gitlab_project_maps_by_id_and_path(post, oidc):
    project = ProjectFactory(
        full_name="gl-org/torch-npu",
        level="L2",
        ci_provider="gitlab",
        gitlab_project_id="4002",
        gitlab_project_path="gl-org/torch-npu",
    )
    body = action_body(
        dispatch_client_payload(DispatchFactory(project=project, state="sent", sent_at=timezone.now())), "in_progress"
    )
    assert post(body, oidc.mint(kind="gitlab", project_path="gl-org/torch-npu")).json()["status"] == "in_progress"
    body["workflow"]["job_name"] = "moved"
    assert post(body, oidc.mint(kind="gitlab", project_path="someone/else")).status_code == 403


# --- the project a token names, read by one prepared statement (identity.project_where) ------------


def test_a_project_is_found_by_its_name_in_any_case_with_every_field_as_the_orm_reads_it(db):
    from relay.callbacks.identity import project_where
    from relay.models import Project

    ProjectFactory(full_name="amd/pytorch-rocm", github_repo_id=7, oidc_required_claims={"ref": ["main"]})
    found = project_where("full_name", "AMD/PyTorch-ROCm", any_case=True)
    stored = Project.objects.get(full_name="amd/pytorch-rocm")
    assert [getattr(found, f.attname) for f in Project._meta.concrete_fields] == [
        getattr(stored, f.attname) for f in Project._meta.concrete_fields
    ]
    assert found.oidc_required_claims == {"ref": ["main"]} and not found._state.adding


def test_an_underscore_or_a_percent_in_a_name_is_a_letter_not_a_wildcard(db):
    from relay.callbacks.identity import project_where

    ProjectFactory(full_name="org/a_b")
    assert project_where("full_name", "org/aXb", any_case=True) is None
    assert project_where("full_name", "org/a%", any_case=True) is None
    assert project_where("full_name", "ORG/A_B", any_case=True).full_name == "org/a_b"


def test_an_exact_column_matches_only_its_exact_value(db):
    from relay.callbacks.identity import project_where

    ProjectFactory(full_name="gitlab/proj", gitlab_project_id="4242")
    assert project_where("gitlab_project_id", "4242").full_name == "gitlab/proj"
    assert project_where("gitlab_project_id", "424") is None


def test_of_several_projects_the_first_in_the_registrys_order_is_taken_as_first_would(db):
    from relay.callbacks.identity import project_where
    from relay.models import Project

    pipeline = "0b7c-org/5d1e-pipe"
    ProjectFactory(full_name="z/later", level="L3", device="npu", buildkite_pipeline=pipeline)
    ProjectFactory(full_name="a/earlier", level="L2", buildkite_pipeline=pipeline.upper())
    orm = Project.objects.filter(buildkite_pipeline__iexact=pipeline).first()
    assert project_where("buildkite_pipeline", pipeline, any_case=True).pk == orm.pk
    assert orm.full_name == "a/earlier"
