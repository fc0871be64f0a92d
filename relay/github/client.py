"""The relay's GitHub client: App JWTs, cached installation tokens, and calls sorted into
transient failures (retry later, honouring GitHub's hints) and permanent ones (stop).

Everything goes to settings.GITHUB_API_URL, so tests and sandbox mode talk to the local
stand-in through exactly the code production uses against api.github.com."""

import functools
import json as _json
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime

import httpx
import jwt
from cryptography.hazmat.primitives import serialization
from django.conf import settings

from relay.inputs import jsonin
from relay.inputs.params import int_param
from relay.ops.cache import soft_delete, soft_get, soft_set

from .ratelimit import write_budget_check

logger = logging.getLogger(__name__)

API_VERSION = "2022-11-28"
TOKEN_REFRESH_MARGIN_SECONDS = 300
"""Installation tokens live an hour; drop ours five minutes before GitHub would."""
SECONDARY_LIMIT_WAIT_SECONDS = 60
"""GitHub's advice when a secondary limit names no wait: at least a minute."""


class GitHubError(Exception):
    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class TransientGitHubError(GitHubError):
    """Worth retrying: 5xx, timeouts, connection errors, rate limits."""


class PermanentGitHubError(GitHubError):
    """Retrying cannot help: validation errors, missing permissions."""


class NotInstalled(PermanentGitHubError):
    """The App is not installed on the repository (or cannot see it)."""


@dataclass(frozen=True)
class Response:
    status: int
    json: object
    headers: httpx.Headers


_client_lock = threading.Lock()
_client: httpx.Client | None = None


def http_client() -> httpx.Client:
    """One pooled client per process; httpx clients are thread-safe."""
    global _client
    with _client_lock:
        if _client is None:
            timeout = httpx.Timeout(settings.GITHUB_HTTP_TIMEOUT, connect=5.0)
            _client = httpx.Client(timeout=timeout, follow_redirects=False, headers=_default_headers())
        return _client


def reset_http_client() -> None:
    global _client
    with _client_lock:
        if _client is not None:
            _client.close()
        _client = None


def _default_headers() -> dict:
    return {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": API_VERSION,
        "User-Agent": "crcr-hud-relay",
    }


# --- authentication -------------------------------------------------------------------------------


def app_jwt(now: float | None = None) -> str:
    """An App JWT: iat backdated 60 s for clock drift, exp 9 min ahead (GitHub allows 10)."""
    now = int(now if now is not None else time.time())
    if not (settings.GITHUB_APP_ID and settings.GITHUB_APP_PRIVATE_KEY):
        raise PermanentGitHubError("GitHub App credentials are not configured")
    claims = {"iat": now - 60, "exp": now + 540, "iss": str(settings.GITHUB_APP_ID)}
    return jwt.encode(claims, _signing_key(settings.GITHUB_APP_PRIVATE_KEY), algorithm="RS256")


@functools.lru_cache(maxsize=4)
def _signing_key(pem: str):
    """The App's private key, parsed once: parsing the PEM cost 40-75 ms of CPU per JWT, i.e. per
    installation token minted, which a fan-out to many installations paid on every token expiry."""
    return serialization.load_pem_private_key(pem.encode(), password=None)


def _token_cache_key(installation_id: int) -> str:
    return f"gh:installation-token:{settings.GITHUB_API_URL}:{installation_id}"


def installation_token(installation_id: int) -> str:
    cached = soft_get(_token_cache_key(installation_id))
    if cached:
        return cached
    response = request("POST", f"/app/installations/{installation_id}/access_tokens", auth=f"Bearer {app_jwt()}")
    token = response.json["token"]
    expires = datetime.fromisoformat(response.json["expires_at"].replace("Z", "+00:00")).timestamp()
    ttl = int(expires - time.time() - TOKEN_REFRESH_MARGIN_SECONDS)
    if ttl > 0:
        soft_set(_token_cache_key(installation_id), token, ttl)
    return token


def forget_installation_token(installation_id: int) -> None:
    soft_delete(_token_cache_key(installation_id))


def installation_id_for_repo(full_name: str) -> int:
    try:
        response = request("GET", f"/repos/{full_name}/installation", auth=f"Bearer {app_jwt()}")
    except PermanentGitHubError as exc:
        if exc.status == 404:
            raise NotInstalled(f"the App is not installed on {full_name}", status=404) from exc
        raise
    return int(response.json["id"])


def as_installation(installation_id: int, method: str, path: str, **kwargs) -> Response:
    """Call with the installation's token, minting a fresh one once if GitHub says it expired. A
    write first takes its points from the installation's budget (raises ratelimit.WriteDeferred)."""
    write_budget_check(installation_id, method)
    try:
        return request(method, path, auth=f"token {installation_token(installation_id)}", **kwargs)
    except TransientGitHubError as exc:
        if exc.status != 401:
            raise
    forget_installation_token(installation_id)
    return request(method, path, auth=f"token {installation_token(installation_id)}", **kwargs)


# --- the calls --------------------------------------------------------------------------------------


def repository_dispatch(installation_id: int, full_name: str, event_type: str, client_payload: dict) -> Response:
    body = {"event_type": event_type, "client_payload": client_payload}
    try:
        return as_installation(installation_id, "POST", f"/repos/{full_name}/dispatches", json=body)
    except PermanentGitHubError as exc:
        if exc.status == 404:
            raise NotInstalled(f"{full_name} is not visible to the App's installation", status=404) from exc
        raise


def list_installations() -> list[dict]:
    return paginate("/app/installations?per_page=100", auth=f"Bearer {app_jwt()}")


def installation_repositories(installation_id: int) -> list[dict]:
    pages = paginate(
        "/installation/repositories?per_page=100",
        auth=f"token {installation_token(installation_id)}",
        key="repositories",
    )
    return pages


def paginate(path: str, *, auth: str, key: str | None = None, max_pages: int = 50) -> list[dict]:
    items: list[dict] = []
    for response in _pages(lambda url: request("GET", url, auth=auth), path, max_pages):
        items.extend(response.json[key] if key else response.json)
    return items


def paginate_as_installation(
    installation_id: int, path: str, *, key: str | None = None, max_pages: int = 50
) -> Response:
    """Every page of a list, as the installation: one Response holding the last page's status
    and headers and the items of all pages (under `key` on each page, when given)."""
    items: list = []
    response = None
    for response in _pages(lambda url: as_installation(installation_id, "GET", url), path, max_pages):
        body = response.json
        items.extend(body.get(key, []) if key and isinstance(body, dict) else body or [])
    return Response(response.status, items, response.headers)


def _pages(fetch, path: str, max_pages: int):
    """Follow rel="next" links from `path`, at most `max_pages` pages."""
    url: str | None = path
    for _ in range(max_pages):
        response = fetch(url)
        yield response
        url = _next_link(response.headers.get("link", ""))
        if url is None:
            return


def _next_link(link_header: str) -> str | None:
    for part in link_header.split(","):
        if 'rel="next"' in part:
            return part.split(";")[0].strip().strip("<>")
    return None


def request(method: str, path: str, *, auth: str, json: object = None) -> Response:
    url = path if path.startswith("http") else f"{settings.GITHUB_API_URL}{path}"
    headers = {"Authorization": auth} if json is None else {"Authorization": auth, "Content-Type": "application/json"}
    try:
        raw = http_client().request(method, url, content=None if json is None else json_bytes(json), headers=headers)
    except httpx.TimeoutException as exc:
        raise TransientGitHubError(f"GitHub timed out: {exc.__class__.__name__}") from exc
    except httpx.TransportError as exc:
        raise TransientGitHubError(f"GitHub unreachable: {exc.__class__.__name__}: {exc}") from exc
    if raw.status_code >= 400:
        raise classify_error(raw)
    body = raw.json() if raw.content and "json" in raw.headers.get("content-type", "") else None
    return Response(raw.status_code, body, raw.headers)


def json_bytes(value: object) -> bytes:
    """A request body as sent: compact UTF-8 JSON, by orjson (a dispatch's ~20 KB webhook payload
    took ~0.2 ms through json.dumps, twice per send with its size check); by json where orjson
    would write otherwise (`jsonin.encoded`)."""
    return jsonin.encoded(value, _compact_json)


def _compact_json(value: object) -> bytes:
    return _json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def classify_error(raw: httpx.Response) -> GitHubError:
    status, message = raw.status_code, _message(raw)
    retry_after = _retry_after(raw)
    text = f"GitHub {status}: {message}"
    if status in (403, 429) and (retry_after is not None or "rate limit" in message.lower()):
        return TransientGitHubError(text, status, retry_after or SECONDARY_LIMIT_WAIT_SECONDS)
    if status == 401 or status >= 500 or status == 408:
        return TransientGitHubError(text, status, retry_after)
    return PermanentGitHubError(text, status)


def _retry_after(raw: httpx.Response) -> float | None:
    """Retry-After wins; otherwise an exhausted primary limit waits until x-ratelimit-reset."""
    seconds = int_param((raw.headers.get("retry-after") or "").strip())
    if seconds is not None:
        return float(seconds)
    reset = int_param(raw.headers.get("x-ratelimit-reset", ""))
    if raw.headers.get("x-ratelimit-remaining") == "0" and reset is not None:
        return max(1.0, reset - time.time())
    return None


def _message(raw: httpx.Response) -> str:
    """GitHub's message, with the reasons of a 422 "Validation Failed" (its `errors`) after it."""
    try:
        body = raw.json()
        errors = body.get("errors") if isinstance(body.get("errors"), list) else []
    except (ValueError, AttributeError):
        return raw.text[:200]
    reasons = [str(e.get("message") or e.get("code") or "") if isinstance(e, dict) else str(e) for e in errors]
    return ": ".join([str(body.get("message", "")), *filter(None, reasons)])[:500]
