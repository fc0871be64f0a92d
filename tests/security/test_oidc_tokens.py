"""Callback tokens against a key server publishing an RSA and an EC key: a token whose algorithm
does not fit its key is a 401 like any other bad token (never a 500); a failing or hanging key
server is fetched once per backoff window, not once per request; and a hostile kid cannot forge a
log line."""

import base64
import io
import json
import logging
import threading
import time

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from relay.callbacks import oidc
from relay.callbacks.receive import callback_receive

pytestmark = pytest.mark.django_db


def post(client, token: str):
    body = {
        "delivery_id": "d-1",
        "event_type": "push",
        "workflow": {"status": "in_progress", "name": "ci", "run_id": "1"},
    }
    return client.post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def test_tokens_signed_with_the_key_their_kid_names_verify(keyserver):
    assert oidc.token_verify(keyserver.mint("RS256", "rsa-1")).claims["repository"] == "sec-org/backend"
    assert oidc.token_verify(keyserver.mint("ES256", "ec-256")).claims["repository"] == "sec-org/backend"


MISMATCHES = {
    "es256-against-the-rsa-kid": lambda k: k.mint("ES256", "rsa-1"),
    "rs256-against-the-ec-kid": lambda k: k.mint("RS256", "ec-256"),
    "es384-against-the-p256-kid": lambda k: k.mint("ES384", "ec-256"),
    "es256-from-another-p256-key": lambda k: k.mint("ES256", "ec-256", signer=ec.generate_private_key(ec.SECP256R1())),
    "ps256-against-the-rs256-kid": lambda k: k.mint("PS256", "rsa-1", signer=k.rsa),
    "rs256-from-another-rsa-key": lambda k: k.mint(
        "RS256", "rsa-1", signer=rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ),
    "header-only-es256-rsa-kid": lambda k: f"{b64({'alg': 'ES256', 'kid': 'rsa-1'})}.{b64(k.claims())}.AAAA",
    "header-only-rs256-ec-kid": lambda k: f"{b64({'alg': 'RS256', 'kid': 'ec-256'})}.{b64(k.claims())}.AAAA",
    "header-only-es384-ec-kid": lambda k: f"{b64({'alg': 'ES384', 'kid': 'ec-256'})}.{b64(k.claims())}.",
    "kid-is-a-number": lambda k: f"{b64({'alg': 'RS256', 'kid': 7})}.{b64(k.claims())}.AAAA",
    "kid-is-an-object": lambda k: f"{b64({'alg': 'RS256', 'kid': {'a': 1}})}.{b64(k.claims())}.AAAA",
    "header-is-a-list": lambda k: f"{b64(['RS256'])}.{b64(k.claims())}.AAAA",
    "claims-are-a-list": lambda k: f"{b64({'alg': 'RS256', 'kid': 'rsa-1'})}.{b64([1, 2])}.AAAA",
    "iss-is-a-number": lambda k: f"{b64({'alg': 'RS256', 'kid': 'rsa-1'})}.{b64(k.claims(iss=5))}.AAAA",
    "signature-not-base64": lambda k: f"{b64({'alg': 'ES256', 'kid': 'ec-256'})}.{b64(k.claims())}.!!!!",
}


@pytest.mark.parametrize("forge", MISMATCHES.values(), ids=MISMATCHES.keys())
def test_a_token_whose_algorithm_does_not_fit_its_key_is_a_401(client, keyserver, forge):
    response = post(client, forge(keyserver))
    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_every_allowed_algorithm_against_every_published_kid_is_a_401_unless_they_fit(client, keyserver):
    fits = {("RS256", "rsa-1"), ("ES256", "ec-256")}
    for alg in oidc.ALLOWED_ALGORITHMS:
        for kid in ("rsa-1", "ec-256"):
            token = f"{b64({'alg': alg, 'kid': kid})}.{b64(keyserver.claims())}.AAAA"
            status = post(client, token).status_code
            assert status == 401, (alg, kid, status)  # forged signatures: even a fitting pair fails verification
    assert {(a, k) for a, k in fits} and oidc.token_verify(keyserver.mint("ES256", "ec-256"))


def test_a_header_nested_past_the_recursion_limit_is_a_401_not_a_500(client, keyserver):
    nested = base64.urlsafe_b64encode(b"[" * 5000).rstrip(b"=").decode()
    response = post(client, f"{nested}.{b64(keyserver.claims())}.AAAA")
    assert response.status_code == 401 and "malformed token" in response.json()["detail"]


def test_a_signed_exp_too_large_for_a_float_is_refused_as_too_far_ahead_not_a_500(keyserver):
    with pytest.raises(oidc.TokenRejected, match="expires more than"):
        oidc.token_verify(keyserver.mint("RS256", "rsa-1", exp=10**400))


# --- a key server that fails or hangs ------------------------------------------------------------------


def test_a_failing_key_server_is_asked_once_per_backoff_window(keyserver, settings):
    settings.CRCR_OIDC_FAILURE_BACKOFF_SECONDS = 60
    keyserver.mode = "fail"
    answers = [
        callback_receive(f"Bearer {keyserver.mint('RS256', 'rsa-1')}", b'{"workflow": {}}').status for _ in range(12)
    ]
    assert answers == [503] * 12
    assert len(keyserver.fetches) == 1, keyserver.fetches


def test_a_failing_discovery_document_is_asked_once_per_backoff_window(keyserver, settings):
    settings.CRCR_OIDC_FAILURE_BACKOFF_SECONDS = 60
    settings.CRCR_OIDC_ISSUERS = keyserver.config(with_jwks_uri=False)
    oidc.reset_clients()
    keyserver.mode = "fail"
    answers = [
        callback_receive(f"Bearer {keyserver.mint('RS256', 'rsa-1')}", b'{"workflow": {}}').status for _ in range(12)
    ]
    assert answers == [503] * 12 and keyserver.fetches == ["/issuer/.well-known/openid-configuration"]


def test_a_hanging_key_server_holds_one_request_for_the_fetch_timeout_and_the_rest_not_at_all(keyserver, settings):
    settings.CRCR_OIDC_FAILURE_BACKOFF_SECONDS = 60
    keyserver.mode, keyserver.hang_seconds = "hang", 8
    token = keyserver.mint("RS256", "rsa-1")
    timings: list[tuple[int, float]] = []

    def call():
        started = time.monotonic()
        status = callback_receive(f"Bearer {token}", b'{"workflow": {}}').status
        timings.append((status, time.monotonic() - started))

    first = threading.Thread(target=call)
    first.start()
    time.sleep(0.3)
    others = [threading.Thread(target=call) for _ in range(16)]
    for thread in others:
        thread.start()
    for thread in [first, *others]:
        thread.join(timeout=20)
    assert [status for status, _ in timings] == [503] * 17
    assert max(elapsed for _, elapsed in timings) < oidc.FETCH_DEADLINE_SECONDS + 1
    assert sorted(elapsed for _, elapsed in timings)[-2] <= oidc.WAIT_FOR_FETCH_SECONDS + 0.5, timings
    started = time.monotonic()
    assert callback_receive(f"Bearer {token}", b'{"workflow": {}}').status == 503
    assert time.monotonic() - started < 0.5 and len(keyserver.fetches) == 1


def test_keys_fetched_before_an_outage_keep_verifying_during_it(keyserver, settings, monkeypatch):
    settings.CRCR_OIDC_FAILURE_BACKOFF_SECONDS = 60
    assert oidc.token_verify(keyserver.mint("RS256", "rsa-1"))
    monkeypatch.setattr(oidc, "JWKS_LIFESPAN_SECONDS", 0)
    keyserver.mode = "fail"
    assert oidc.token_verify(keyserver.mint("ES256", "ec-256")).claims["jti"]
    assert len(keyserver.fetches) == 2


# --- log forging ----------------------------------------------------------------------------------------


@pytest.fixture
def console():
    """What the configured console handler writes, through its own formatter."""
    configured = [
        h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler and h.formatter is not None
    ]
    assert configured, "settings.LOGGING configures a console handler on the root logger"
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(configured[0].formatter)
    logging.getLogger().addHandler(handler)
    yield stream
    logging.getLogger().removeHandler(handler)


def test_a_kid_with_a_newline_cannot_forge_a_log_line(client, keyserver, console):
    forged = "rsa-9\n2026-12-02 10:00:00,000 INFO relay.callbacks callback accepted for pytorch/pytorch"
    token = f"{b64({'alg': 'RS256', 'kid': forged})}.{b64(keyserver.claims())}.AAAA"
    assert post(client, token).status_code == 401
    lines = console.getvalue().splitlines()
    assert lines and not any(line.startswith("2026-12-02 10:00:00,000") for line in lines), lines
    assert any("rsa-9\\n2026-12-02" in line for line in lines)


def test_every_control_character_in_a_logged_value_is_escaped(console):
    logging.getLogger("relay.callbacks").warning("job %s refused", "a\rb\x1b[31mc\u2028d\x85e")
    line = console.getvalue()
    assert line.count("\n") == 1 and "\r" not in line and "\x1b" not in line and "\u2028" not in line
    assert "a\\rb\\x1b[31mc\\u2028d\\x85e" in line
