"""Verifying the OIDC token a downstream CI run sends with its callback.

Only configured issuers are trusted (never a key fetched on an unverified `iss`); keys come from
each issuer's JWKS, fetched with bounded time and size, kept for a few minutes and refetched at
most once per cooldown when a token names an unknown `kid`. The key decides the algorithm: a token
whose `alg` does not fit its key is refused, as is every other malformed token (401), whatever the
parse or the crypto raises for it. A key server we cannot reach is our problem (503), not the
caller's (401) — and its failure is remembered for a while (a negative cache), so a dead or slow
issuer costs one fetch per backoff window, not one per unauthenticated request."""

import base64
import threading
import time
from dataclasses import dataclass, field

import httpx
import jwt
from django.conf import settings

from relay.inputs import jsonin

ALLOWED_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384"]
FETCH_TIMEOUT = httpx.Timeout(3.0, connect=2.0)
FETCH_DEADLINE_SECONDS = 4.0
"""A key server that drips bytes cannot hold a request longer than this."""
FETCH_MAX_BYTES = 512 * 1024
WAIT_FOR_FETCH_SECONDS = 2.0
"""One request fetches an issuer's keys; the others wait this long for it, then answer 503 with
Retry-After. Long enough for a key server that answers slowly under a cold-start burst (at 1 s,
one callback of 5,000 got a needless 503 on a loaded 2-core runner while the fetch completed),
well short of the fetch's own deadline, so a hanging key server holds the others 2 s at most."""
JWKS_LIFESPAN_SECONDS = 300
REQUIRED_CLAIMS = ["iss", "aud", "exp", "iat", "jti"]
MAX_TOKEN_CHARS = 16_384


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


@dataclass
class _IssuerState:
    """What this process knows about one issuer's keys, and when it last failed to learn more."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    jwks_uri: str | None = None
    keys: dict = field(default_factory=dict)
    fetched_at: float | None = None
    failed_until: float = 0.0
    failure: str = ""


_states: dict[str, _IssuerState] = {}
_states_lock = threading.Lock()

# Every way PyJWT's signature primitive (and the crypto below it) reports a token or key it cannot
# use: key/alg mismatches raise InvalidKeyError, TypeError or ValueError rather than returning False.
_UNUSABLE_TOKEN = (jwt.PyJWTError, TypeError, ValueError, KeyError, AttributeError)


_issuers_memo: tuple[object, dict] = (None, {})


def issuers() -> dict[str, Issuer]:
    """The configured issuers by URL, built once per configuration object (every callback asks)."""
    global _issuers_memo
    source, built = _issuers_memo
    if source is not settings.CRCR_OIDC_ISSUERS:
        source = settings.CRCR_OIDC_ISSUERS
        built = {i["issuer"].rstrip("/"): Issuer(i["issuer"].rstrip("/"), i["kind"], i.get("jwks_uri")) for i in source}
        _issuers_memo = (source, built)
    return built


def bearer_token(header: str | None) -> str:
    value = (header or "").strip()
    if value[:7].lower() == "bearer ":
        value = value[7:].strip()
    if not value:
        raise TokenRejected("missing authorization token")
    if len(value) > MAX_TOKEN_CHARS:
        raise TokenRejected("malformed token: too long")
    return value


def token_verify(token: str) -> VerifiedToken:
    """Every check `jwt.decode` made, from one strict parse of the token: PyJWT's own parse (a
    per-character base64 alphabet check, a second JSON read) cost several times the signature check
    (docs/performance.md). PyJWT still parses the keys and runs the signature primitive."""
    header, claims, signing_input, signature = _parts(token)
    issuer = _trusted_issuer(header, claims)
    key = _signing_key(issuer, header)
    _signature_check(key, signing_input, signature)
    _claims_check(claims)
    _times_check(claims)
    return VerifiedToken(issuer, claims)


def _parts(token: str) -> tuple[dict, dict, bytes, bytes]:
    """(header, claims, signing input, signature), or TokenRejected for anything that is not a
    compact JWS of two JSON objects. Each is read as a body is (relay.inputs.jsonin.checked: orjson
    first, nesting capped, and no NUL or lone surrogate, since the jti is stored and the identity
    claims are looked up and no text column holds those), so a deep one is a 401, not a 500."""
    try:
        header_segment, claims_segment, signature_segment = token.split(".")
        header, claims = (
            jsonin.checked(_base64url(segment), what=f"its {name}")
            for segment, name in ((header_segment, "header"), (claims_segment, "claims"))
        )
        signature = _base64url(signature_segment)
    except (ValueError, TypeError, RecursionError) as exc:
        raise TokenRejected(f"malformed token: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise TokenRejected("malformed token: its header and claims must be JSON objects")
    return header, claims, f"{header_segment}.{claims_segment}".encode(), signature


def _base64url(segment: str) -> bytes:
    """Strict base64url, as PyJWT reads a segment: padding only to a multiple of four, and only
    the canonical encoding. The lax decoder skips foreign characters and ignores stray bits, so
    re-encoding what it decoded is the check: only the canonical alphabet-only text survives it."""
    stripped = segment.rstrip("=")
    padding = len(segment) - len(stripped)
    if padding > 2 or (padding and len(segment) % 4):
        raise ValueError("invalid base64url padding")
    decoded = base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4))
    if base64.urlsafe_b64encode(decoded).rstrip(b"=") != stripped.encode():
        raise ValueError("invalid base64url")
    return decoded


def _trusted_issuer(header: dict, claims: dict) -> Issuer:
    _header_check(header)
    iss = claims.get("iss")
    issuer = issuers().get(iss) if isinstance(iss, str) else None
    if issuer is None:  # configured URLs have no trailing slash; a token's `iss` must equal one
        raise TokenRejected(f"untrusted OIDC issuer: {iss!r}")
    return issuer


def _header_check(header: dict) -> None:
    """An accepted algorithm and a key id; `crit` may name only `b64`, which must be present and
    not false (a detached payload): what PyJWT understands, and all that a CI token ever uses."""
    if header.get("alg") not in ALLOWED_ALGORITHMS:
        raise TokenRejected(f"token algorithm {header.get('alg')!r} is not accepted")
    if not isinstance(header.get("kid"), str) or not header["kid"]:
        raise TokenRejected("token header has no key id (kid)")
    crit = header.get("crit", ["b64"])
    if not isinstance(crit, list) or not crit or any(name != "b64" for name in crit):
        raise TokenRejected(f"token header names unsupported critical extensions: {crit!r}")
    if ("crit" in header and "b64" not in header) or header.get("b64", True) is False:
        raise TokenRejected("token header asks for a detached payload (b64), which is not supported")


def _signature_check(key: jwt.PyJWK, signing_input: bytes, signature: bytes) -> None:
    """PyJWT's primitive for the key's algorithm; `prepare_key` refuses a key whose curve does not
    fit its `alg` (PyJWK accepts a P-384 key labelled ES256)."""
    try:
        valid = key.Algorithm.verify(signing_input, key.Algorithm.prepare_key(key.key), signature)
    except _UNUSABLE_TOKEN as exc:
        raise TokenRejected(f"invalid token: {exc}") from exc
    if not valid:
        raise TokenRejected("invalid token: signature verification failed")


def _claims_check(claims: dict) -> None:
    """Required claims (null counts as missing, as in PyJWT), our audience, string ids. `iss` was
    matched to a configured issuer before the key was chosen."""
    missing = [name for name in REQUIRED_CLAIMS if claims.get(name) is None]
    if missing:
        raise TokenRejected(f"invalid token: it lacks the required claim(s) {', '.join(missing)}")
    _audience_check(claims["aud"])
    if not isinstance(claims["jti"], str):
        raise TokenRejected("invalid token: its JWT id (jti) must be a string")
    if not isinstance(claims.get("sub", ""), str):
        raise TokenRejected("invalid token: its subject (sub) must be a string")


def _audience_check(aud) -> None:
    """`aud` is one string or a list of strings, and one of them is ours (PyJWT, strict_aud off)."""
    if not aud:
        raise TokenRejected("invalid token: it lacks the required claim(s) aud")
    claimed = [aud] if isinstance(aud, str) else aud
    if not isinstance(claimed, list) or not all(isinstance(name, str) for name in claimed):
        raise TokenRejected("invalid token: its audience (aud) must be a string or a list of strings")
    ours = settings.CRCR_OIDC_AUDIENCE
    if not any(name in claimed for name in ([ours] if isinstance(ours, str) else ours)):
        raise TokenRejected(f"invalid token: audience {aud!r} does not include {ours!r}")


def _times_check(claims: dict) -> None:
    """Issued and valid by now and not expired, each within the leeway (as PyJWT's `leeway`)."""
    now, leeway = time.time(), settings.CRCR_OIDC_LEEWAY_SECONDS
    if _numeric_date(claims, "iat") > now + leeway:
        raise TokenRejected("invalid token: it is not yet valid (iat is in the future)")
    if "nbf" in claims and _numeric_date(claims, "nbf") > now + leeway:
        raise TokenRejected("invalid token: it is not yet valid (nbf)")
    exp = _numeric_date(claims, "exp")
    if exp <= now - leeway:
        raise TokenRejected("invalid token: it has expired")
    _lifetime_check(exp, now)


def _lifetime_check(exp: int, now: float) -> None:
    """An `exp` no further ahead than CRCR_OIDC_MAX_LIFETIME_SECONDS: its jti is remembered until
    then. Compared int against float (not subtracted), so a huge `exp` is refused, not an overflow."""
    limit = settings.CRCR_OIDC_MAX_LIFETIME_SECONDS
    if exp > now + limit:
        raise TokenRejected(f"invalid token: it expires more than {limit} seconds from now")


def _numeric_date(claims: dict, name: str) -> int:
    """int() of the claim, exactly as PyJWT reads it: a float is truncated and (leniently) a
    numeric string or a boolean passes; anything else is refused."""
    try:
        return int(claims[name])
    except (TypeError, ValueError, OverflowError):
        raise TokenRejected(f"invalid token: {name} must be a number") from None


def _signing_key(issuer: Issuer, header: dict) -> jwt.PyJWK:
    """The issuer's published key for the token's kid, and only if it is a key for the token's alg."""
    kid, alg = header["kid"], header["alg"]
    key = _keys(issuer).get(kid)
    if key is None:
        key = _keys(issuer, refresh_for=kid).get(kid)
    if key is None and time.monotonic() < _state(issuer).failed_until:
        raise KeyServerUnavailable(f"cannot refresh the keys of {issuer.url} to find kid {kid!r}; retry later")
    if key is None:
        raise TokenRejected(f"no key of {issuer.url} matches the token's kid {kid!r}")
    if key.algorithm_name != alg:
        raise TokenRejected(f"token algorithm {alg} does not fit key {kid!r} ({key.algorithm_name})")
    return key


def _state(issuer: Issuer) -> _IssuerState:
    with _states_lock:
        return _states.setdefault(issuer.url, _IssuerState(jwks_uri=issuer.jwks_uri))


def _keys(issuer: Issuer, refresh_for: str | None = None) -> dict:
    """{kid: PyJWK}. Fresh keys come from memory; stale or missing ones are fetched by one thread
    at a time; within the backoff after a failure nobody fetches (stale keys still serve)."""
    state = _state(issuer)
    if _usable(state, refresh_for):
        return state.keys
    if not state.lock.acquire(timeout=WAIT_FOR_FETCH_SECONDS):
        if state.keys:
            return state.keys
        raise KeyServerUnavailable(f"keys of {issuer.url} are being fetched by another request; retry shortly")
    try:
        if _usable(state, refresh_for):  # another thread fetched (or failed) while we waited
            return state.keys
        return _refresh(issuer, state)
    finally:
        state.lock.release()


def _usable(state: _IssuerState, refresh_for: str | None) -> bool:
    now = time.monotonic()
    if refresh_for is not None:
        if refresh_for in state.keys:
            return True
        # An unknown kid refetches at most once per cooldown (key rotation), never per request.
        return (
            state.fetched_at is not None
            and now - state.fetched_at < settings.CRCR_OIDC_JWKS_COOLDOWN_SECONDS
            or now < state.failed_until
        )
    if state.fetched_at is not None and now - state.fetched_at < JWKS_LIFESPAN_SECONDS:
        return True
    if now < state.failed_until:
        if state.keys:
            return True
        raise KeyServerUnavailable(f"keys of the issuer are unavailable (last failure: {state.failure}); retry later")
    return False


def _refresh(issuer: Issuer, state: _IssuerState) -> dict:
    try:
        state.jwks_uri = state.jwks_uri or _discovered_jwks_uri(issuer)
        keys = {k.key_id: k for k in jwt.PyJWKSet.from_dict(fetch_json(state.jwks_uri)).keys if k.key_id}
    except KeyServerUnavailable as exc:
        return _failed(state, str(exc))
    except (jwt.PyJWKError, jwt.PyJWKSetError, TypeError, ValueError) as exc:
        return _failed(state, f"{issuer.url} served unusable keys: {exc}")
    state.keys, state.fetched_at, state.failed_until, state.failure = keys, time.monotonic(), 0.0, ""
    return keys


def _failed(state: _IssuerState, reason: str) -> dict:
    state.failed_until, state.failure = time.monotonic() + settings.CRCR_OIDC_FAILURE_BACKOFF_SECONDS, reason[:300]
    if state.keys:
        return state.keys  # keys we verified with minutes ago are still the issuer's best answer
    raise KeyServerUnavailable(reason)


def _discovered_jwks_uri(issuer: Issuer) -> str:
    document = fetch_json(f"{issuer.url}/.well-known/openid-configuration")
    uri = document.get("jwks_uri") if isinstance(document, dict) else None
    if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
        raise KeyServerUnavailable(f"the discovery document of {issuer.url} names no jwks_uri")
    return uri


def fetch_json(url: str):
    """GET a small JSON document within FETCH_DEADLINE_SECONDS and FETCH_MAX_BYTES, or
    KeyServerUnavailable."""
    deadline = time.monotonic() + FETCH_DEADLINE_SECONDS
    try:
        with httpx.stream("GET", url, timeout=FETCH_TIMEOUT, follow_redirects=False) as response:
            response.raise_for_status()
            data = bytearray()
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) > FETCH_MAX_BYTES or time.monotonic() > deadline:
                    raise KeyServerUnavailable(f"{url} answered too much or too slowly")
        return jsonin.loads(bytes(data), what=url)  # the one depth rule: a deep document is refused, never a 500
    except (httpx.HTTPError, ValueError) as exc:
        raise KeyServerUnavailable(f"could not fetch {url}: {exc.__class__.__name__}: {exc}"[:300]) from exc


def reset_clients() -> None:
    """Tests point issuers at fresh stand-ins; drop what earlier ones served."""
    with _states_lock:
        _states.clear()
