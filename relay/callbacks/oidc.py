"""Verifying the OIDC token a downstream CI run sends with its callback.

Only configured issuers are trusted (never a key fetched on an unverified `iss`); keys come from
each issuer's JWKS through one cached PyJWKClient per issuer; algorithms are an explicit
allowlist (no `none`, no HMAC); `aud`, `iss`, `exp`/`nbf`/`iat` are checked with a small leeway.
A key server we cannot reach is our problem (503), not the caller's (401)."""

import threading
from dataclasses import dataclass

import httpx
import jwt
from django.conf import settings

ALLOWED_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384"]
JWKS_TIMEOUT_SECONDS = 5
JWKS_LIFESPAN_SECONDS = 300
REQUIRED_CLAIMS = ["iss", "aud", "exp", "iat", "jti"]


class TokenRejected(Exception):
    """401: no token, or one we cannot trust."""


class KeyServerUnavailable(Exception):
    """503: the issuer's keys could not be fetched; the caller should retry."""


@dataclass(frozen=True)
class Issuer:
    url: str
    kind: str
    jwks_uri: str | None


@dataclass(frozen=True)
class VerifiedToken:
    issuer: Issuer
    claims: dict


_clients: dict[str, jwt.PyJWKClient] = {}
_discovered: dict[str, str] = {}
_lock = threading.Lock()


def issuers() -> dict[str, Issuer]:
    return {i["issuer"].rstrip("/"): Issuer(i["issuer"].rstrip("/"), i["kind"], i.get("jwks_uri")) for i in settings.CRCR_OIDC_ISSUERS}


def bearer_token(header: str | None) -> str:
    value = (header or "").strip()
    if value[:7].lower() == "bearer ":
        value = value[7:].strip()
    if not value:
        raise TokenRejected("missing authorization token")
    return value


def token_verify(token: str) -> VerifiedToken:
    issuer = _trusted_issuer(token)
    key = _signing_key(issuer, token)
    try:
        claims = jwt.decode(
            token, key, algorithms=ALLOWED_ALGORITHMS, audience=settings.CRCR_OIDC_AUDIENCE, issuer=issuer.url,
            leeway=settings.CRCR_OIDC_LEEWAY_SECONDS, options={"require": REQUIRED_CLAIMS, "strict_aud": False},
        )
    except jwt.InvalidTokenError as exc:
        raise TokenRejected(f"invalid token: {exc}") from exc
    return VerifiedToken(issuer, claims)


def _trusted_issuer(token: str) -> Issuer:
    try:
        header = jwt.get_unverified_header(token)
        unverified = jwt.decode(token, options={"verify_signature": False})
    except jwt.InvalidTokenError as exc:
        raise TokenRejected(f"malformed token: {exc}") from exc
    if header.get("alg") not in ALLOWED_ALGORITHMS:
        raise TokenRejected(f"token algorithm {header.get('alg')!r} is not accepted")
    issuer = issuers().get(str(unverified.get("iss", "")).rstrip("/"))
    if issuer is None or str(unverified.get("iss")) not in (issuer.url, issuer.url + "/"):
        raise TokenRejected(f"untrusted OIDC issuer: {unverified.get('iss')!r}")
    return issuer


def _signing_key(issuer: Issuer, token: str):
    try:
        return _client_for(issuer).get_signing_key_from_jwt(token).key
    except jwt.PyJWKClientConnectionError as exc:
        raise KeyServerUnavailable(f"could not fetch keys of {issuer.url}: {exc}") from exc
    except (jwt.PyJWKError, jwt.PyJWKSetError) as exc:
        raise KeyServerUnavailable(f"{issuer.url} served unusable keys: {exc}") from exc
    except jwt.PyJWKClientError as exc:
        raise TokenRejected(f"no key of {issuer.url} matches the token: {exc}") from exc
    except jwt.InvalidTokenError as exc:
        raise TokenRejected(f"malformed token: {exc}") from exc


def _client_for(issuer: Issuer) -> jwt.PyJWKClient:
    jwks_uri = issuer.jwks_uri or _discover_jwks_uri(issuer)
    with _lock:
        if jwks_uri not in _clients:
            _clients[jwks_uri] = jwt.PyJWKClient(
                jwks_uri, lifespan=JWKS_LIFESPAN_SECONDS, timeout=JWKS_TIMEOUT_SECONDS,
                cache_keys=False, cooldown_duration=settings.CRCR_OIDC_JWKS_COOLDOWN_SECONDS,
            )
        return _clients[jwks_uri]


def _discover_jwks_uri(issuer: Issuer) -> str:
    if issuer.url in _discovered:
        return _discovered[issuer.url]
    try:
        response = httpx.get(f"{issuer.url}/.well-known/openid-configuration", timeout=JWKS_TIMEOUT_SECONDS)
        response.raise_for_status()
        uri = response.json()["jwks_uri"]
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        raise KeyServerUnavailable(f"could not read the discovery document of {issuer.url}: {exc}") from exc
    _discovered[issuer.url] = uri
    return uri


def reset_clients() -> None:
    """Tests point issuers at fresh stand-ins; drop what earlier ones served."""
    with _lock:
        _clients.clear()
        _discovered.clear()
