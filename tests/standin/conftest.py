"""Fixtures for the stand-in's own tests: a started stand-in, an httpx client, App JWTs, tokens."""

import functools
import time

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization

from devtools.standin import StandIn
from devtools.standin.keys import SigningKey

DOWNSTREAM = "intel/torch-xpu-ops"
UPSTREAM = "pytorch/pytorch"
SHA = "a" * 40
PARENT = "b" * 40


@pytest.fixture(scope="session")
def app_key_pem() -> str:
    # One App key for the whole session: RSA generation is the slow part of starting a stand-in.
    return SigningKey().private_pem()


@pytest.fixture
def gh(app_key_pem):
    with StandIn(app_id=1001, app_private_key_pem=app_key_pem).start() as stand:
        yield stand


@pytest.fixture
def api(gh):
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    with httpx.Client(base_url=gh.url, headers=headers, timeout=10) as client:
        yield client


@functools.lru_cache
def _loaded(pem: str):
    # jwt.encode would re-parse the PEM on every call, which costs more than the request.
    return serialization.load_pem_private_key(pem.encode(), password=None)


def app_jwt(stand: StandIn, iat_offset: int = -60, lifetime: int = 600, iss="1001", key_pem: str | None = None) -> str:
    now = int(time.time())
    claims = {"iat": now + iat_offset, "exp": now + iat_offset + lifetime, "iss": iss}
    return jwt.encode(claims, _loaded(key_pem or stand.app_private_key_pem), algorithm="RS256")


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def mint_token(api: httpx.Client, stand: StandIn, installation_id: int = 11, **body) -> str:
    response = api.post(
        f"/app/installations/{installation_id}/access_tokens", headers=bearer(app_jwt(stand)), json=body or None
    )
    assert response.status_code == 201, response.text
    return response.json()["token"]


@pytest.fixture
def installed(gh):
    """The App installed on intel (id 11) with torch-xpu-ops, and on pytorch (id 1) with pytorch."""
    gh.add_installation(installation_id=11, account="intel")
    gh.add_repo(DOWNSTREAM, repo_id=123, installation_id=11)
    gh.add_installation(installation_id=1, account="pytorch")
    gh.add_repo(UPSTREAM, repo_id=65600975, installation_id=1)
    return gh


@pytest.fixture
def downstream_token(api, installed) -> dict:
    return {"Authorization": f"token {mint_token(api, installed, 11)}"}


@pytest.fixture
def upstream_token(api, installed) -> dict:
    return {"Authorization": f"token {mint_token(api, installed, 1)}"}
