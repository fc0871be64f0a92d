import re
import time
from datetime import UTC, datetime

from devtools.standin.keys import SigningKey

from .conftest import DOWNSTREAM, app_jwt, bearer, mint_token


def test_it_answers_get_app_for_a_good_jwt(gh, api):
    response = api.get("/app", headers=bearer(app_jwt(gh)))
    assert response.status_code == 200
    assert response.json()["id"] == 1001
    assert response.json()["slug"] == "crcr-relay"


def test_it_accepts_the_client_id_as_issuer(gh, api):
    assert api.get("/app", headers=bearer(app_jwt(gh, iss="Iv1.sandbox"))).status_code == 200


def test_it_accepts_the_token_scheme_too(gh, api):
    assert api.get("/app", headers={"Authorization": f"token {app_jwt(gh)}"}).status_code == 200


def _rejection(api, token):
    response = api.get("/app", headers=bearer(token))
    assert response.status_code == 401
    assert response.json()["documentation_url"] == "https://docs.github.com/rest"
    return response.json()["message"]


def test_it_rejects_an_expired_app_jwt(gh, api):
    message = _rejection(api, app_jwt(gh, iat_offset=-700, lifetime=600))
    assert message.startswith("'Expiration time' claim ('exp') must be a numeric value")


def test_it_rejects_an_app_jwt_issued_in_the_future(gh, api):
    message = _rejection(api, app_jwt(gh, iat_offset=120))
    assert message.startswith("'Issued at' claim ('iat') must be an Integer")


def test_it_tolerates_a_minute_of_clock_skew_on_iat(gh, api):
    assert api.get("/app", headers=bearer(app_jwt(gh, iat_offset=30, lifetime=540))).status_code == 200


def test_it_rejects_an_app_jwt_that_expires_too_far_ahead(gh, api):
    assert _rejection(api, app_jwt(gh, lifetime=1200)) == "'Expiration time' claim ('exp') is too far in the future"


def test_it_rejects_an_app_jwt_signed_with_another_key(gh, api):
    other = SigningKey().private_pem()
    assert _rejection(api, app_jwt(gh, key_pem=other)) == "A JSON web token could not be decoded"


def test_it_rejects_an_app_jwt_for_another_app(gh, api):
    assert _rejection(api, app_jwt(gh, iss="999")) == "Integration not found"


def test_it_rejects_a_garbage_token_as_bad_credentials(api):
    assert _rejection(api, "not-a-token") == "Bad credentials"


def test_it_rejects_an_installation_token_on_an_app_endpoint(gh, api, installed):
    assert _rejection(api, mint_token(api, gh)) == "A JSON web token could not be decoded"


def test_it_requires_authentication_on_app_endpoints(api):
    assert api.get("/app").status_code == 401


def test_it_mints_an_installation_token_valid_for_an_hour(gh, api, installed):
    response = api.post("/app/installations/11/access_tokens", headers=bearer(app_jwt(gh)))
    assert response.status_code == 201
    body = response.json()
    assert re.fullmatch(r"ghs_[A-Za-z0-9]{36}", body["token"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", body["expires_at"])
    expires = datetime.strptime(body["expires_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert abs(expires.timestamp() - (time.time() + 3600)) < 5
    assert body["permissions"]["contents"] == "write"
    assert body["repository_selection"] == "selected"


def test_it_answers_404_when_minting_for_an_unknown_installation(gh, api):
    assert api.post("/app/installations/77/access_tokens", headers=bearer(app_jwt(gh))).status_code == 404


def test_it_scopes_a_token_to_the_repositories_asked_for(gh, api, installed):
    gh.add_repo("intel/other", repo_id=124, installation_id=11)
    response = api.post(
        "/app/installations/11/access_tokens", headers=bearer(app_jwt(gh)), json={"repositories": ["other"]}
    )
    assert [r["full_name"] for r in response.json()["repositories"]] == ["intel/other"]
    token = response.json()["token"]
    dispatch = {"event_type": "pull_request", "client_payload": {}}
    assert api.post(f"/repos/{DOWNSTREAM}/dispatches", json=dispatch, headers=bearer(token)).status_code == 404


def test_it_refuses_to_widen_a_tokens_permissions(gh, api, installed):
    body = {"permissions": {"administration": "write"}}
    response = api.post("/app/installations/11/access_tokens", headers=bearer(app_jwt(gh)), json=body)
    assert response.status_code == 422


def test_it_treats_an_expired_installation_token_as_bad_credentials(gh, api, installed):
    token = mint_token(api, gh)
    gh.world.tokens[token]["expires_at"] = time.time() - 1
    response = api.get("/installation/repositories", headers=bearer(token))
    assert response.status_code == 401
    assert response.json()["message"] == "Bad credentials"


def test_it_finds_the_installation_of_a_repo_case_insensitively(gh, api, installed):
    response = api.get("/repos/Intel/Torch-XPU-Ops/installation", headers=bearer(app_jwt(gh)))
    assert response.status_code == 200
    assert response.json()["id"] == 11
    assert response.json()["account"]["login"] == "intel"
    assert response.json()["app_id"] == 1001


def test_it_answers_404_for_a_repo_the_app_is_not_installed_on(gh, api):
    gh.add_repo("someone/else", repo_id=5)
    response = api.get("/repos/someone/else/installation", headers=bearer(app_jwt(gh)))
    assert response.status_code == 404
    assert response.json() == {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}


def test_it_gets_an_installation_by_id_or_404(gh, api, installed):
    assert api.get("/app/installations/11", headers=bearer(app_jwt(gh))).json()["id"] == 11
    assert api.get("/app/installations/12", headers=bearer(app_jwt(gh))).status_code == 404


def test_it_paginates_app_installations_with_a_link_header(gh, api):
    for number in range(1, 4):
        gh.add_installation(installation_id=number, account=f"org{number}")
    response = api.get("/app/installations?per_page=2", headers=bearer(app_jwt(gh)))
    assert [i["id"] for i in response.json()] == [1, 2]
    assert 'rel="next"' in response.headers["link"]
    assert "page=2" in response.headers["link"]
