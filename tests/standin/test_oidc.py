import httpx
import jwt
import pytest

from devtools.standin.keys import split_jwt

AUDIENCE = "pytorch-cross-repo-ci-relay"


def _jwks_uri(gh, kind: str) -> str:
    return {c["kind"]: c["jwks_uri"] for c in gh.oidc.issuers_config()}[kind]


def _verify(gh, token: str, kind: str = "github") -> dict:
    key = jwt.PyJWKClient(_jwks_uri(gh, kind)).get_signing_key_from_jwt(token)
    return jwt.decode(
        token,
        key,
        algorithms=["RS256"],
        audience=AUDIENCE,
        issuer=gh.oidc.issuer(kind),
        options={"require": ["iss", "aud", "exp", "iat", "nbf", "jti", "sub"], "strict_aud": True},
    )


def _kids(gh, kind: str = "github") -> list[str]:
    return [key["kid"] for key in httpx.get(_jwks_uri(gh, kind)).json()["keys"]]


@pytest.mark.parametrize("kind", ["github", "buildkite", "gitlab"])
def test_it_serves_a_discovery_document_per_issuer(gh, kind):
    issuer = gh.oidc.issuer(kind)
    assert issuer == f"{gh.url}/oidc/{kind}"
    doc = httpx.get(f"{issuer}/.well-known/openid-configuration").json()
    assert doc["issuer"] == issuer
    assert doc["id_token_signing_alg_values_supported"] == ["RS256"]
    keys = httpx.get(doc["jwks_uri"]).json()["keys"]
    assert len(keys) >= 2
    assert all({"kty", "alg", "use", "kid", "n", "e"} <= set(k) and k["alg"] == "RS256" for k in keys)


def test_gitlab_publishes_keys_at_its_own_path(gh):
    doc = httpx.get(f"{gh.oidc.issuer('gitlab')}/.well-known/openid-configuration").json()
    assert doc["jwks_uri"] == f"{gh.url}/oidc/gitlab/oauth/discovery/keys"


def test_issuers_config_has_the_relays_setting_shape(gh):
    config = gh.oidc.issuers_config()
    assert [c["kind"] for c in config] == ["github", "buildkite", "gitlab"]
    assert all(set(c) == {"issuer", "kind", "jwks_uri"} for c in config)


def test_it_mints_a_github_token_that_verifies_against_the_jwks(gh):
    token = gh.oidc.mint(repository="intel/torch-xpu-ops", repository_id="123")
    claims = _verify(gh, token)
    assert claims["sub"] == "repo:intel/torch-xpu-ops:ref:refs/heads/main"
    assert (claims["repository_owner"], claims["repository_id"], claims["run_attempt"]) == ("intel", "123", "1")
    assert claims["event_name"] == "repository_dispatch"
    assert claims["nbf"] == claims["iat"] - 600
    assert claims["exp"] == claims["iat"] + 300
    assert split_jwt(token)[0] == {"typ": "JWT", "alg": "RS256", "kid": _kids(gh)[0]}


def test_it_mints_a_buildkite_shaped_token(gh):
    claims = _verify(gh, gh.oidc.mint("buildkite", pipeline_slug="xpu", build_commit="f" * 40), "buildkite")
    assert claims["sub"] == f"organization:sandbox-org:pipeline:xpu:ref:refs/heads/main:commit:{'f' * 40}:step:crcr"
    assert isinstance(claims["build_number"], int)
    assert claims["organization_id"] and claims["pipeline_id"]


def test_it_mints_a_gitlab_shaped_token(gh):
    claims = _verify(gh, gh.oidc.mint("gitlab", project_path="grp/proj"), "gitlab")
    assert claims["sub"] == "project_path:grp/proj:ref_type:branch:ref:main"
    assert (claims["namespace_path"], claims["ref_protected"]) == ("grp", "true")


def test_claims_override_and_omit_defaults(gh):
    claims = _verify(gh, gh.oidc.mint(run_id="9", omit=("sha", "workflow")))
    assert claims["run_id"] == "9"
    assert "sha" not in claims and "workflow" not in claims


def test_an_expired_token_fails_verification(gh):
    with pytest.raises(jwt.ExpiredSignatureError):
        _verify(gh, gh.oidc.mint(lifetime=-120))


def test_rotation_keeps_the_old_key_published(gh):
    before = _kids(gh)
    old_token = gh.oidc.mint()
    gh.oidc.rotate()
    after = _kids(gh)
    assert after[1] == before[0] and after[0] not in before
    assert _verify(gh, old_token)["iss"] == gh.oidc.issuer()


def test_a_token_signed_with_the_previous_key_verifies(gh):
    assert _verify(gh, gh.oidc.mint(key="previous"))


def test_an_unknown_key_has_a_kid_absent_from_the_jwks(gh):
    token = gh.oidc.mint(key="unknown")
    assert split_jwt(token)[0]["kid"] not in _kids(gh)
    with pytest.raises(jwt.PyJWKClientError):
        _verify(gh, token)


def test_it_mints_unsigned_and_hmac_confusion_tokens(gh):
    unsigned = gh.oidc.mint(alg="none")
    assert unsigned.endswith(".") and split_jwt(unsigned)[0]["alg"] == "none"
    confused = gh.oidc.mint(alg="HS256")
    assert split_jwt(confused)[0]["alg"] == "HS256"
    with pytest.raises(jwt.InvalidTokenError):
        _verify(gh, confused)


def test_headers_can_be_overridden_or_dropped(gh):
    header = split_jwt(gh.oidc.mint(headers={"kid": None, "x5t": "abc"}))[0]
    assert "kid" not in header and header["x5t"] == "abc"


def test_it_emulates_the_actions_id_token_request(gh):
    url, request_token = gh.actions_request_token(repository="intel/torch-xpu-ops", repository_id="123", run_id="77")
    response = httpx.get(f"{url}&audience={AUDIENCE}", headers={"Authorization": f"bearer {request_token}"})
    claims = _verify(gh, response.json()["value"])
    assert (claims["repository"], claims["repository_id"], claims["run_id"]) == ("intel/torch-xpu-ops", "123", "77")


def test_the_actions_id_token_defaults_to_the_owner_audience(gh):
    url, request_token = gh.actions_request_token(repository="intel/torch-xpu-ops")
    token = httpx.get(url, headers={"Authorization": f"Bearer {request_token}"}).json()["value"]
    assert jwt.decode(token, options={"verify_signature": False})["aud"] == "https://github.com/intel"


def test_the_actions_id_token_needs_the_request_token(gh):
    url, _ = gh.actions_request_token()
    assert httpx.get(url, headers={"Authorization": "bearer wrong"}).status_code == 401
