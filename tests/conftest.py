import hashlib
import hmac
import json
import os
import uuid
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "github-webhooks"
WEBHOOK_SECRET = "It's a Secret to Everybody"
UPSTREAM = "pytorch/pytorch"
UPSTREAM_ID = 65600975


def fixture_payload(name: str, upstream: str = UPSTREAM) -> dict:
    """A real GitHub payload with its sample repository rewritten to the upstream."""
    payload = json.loads((FIXTURES / f"{name}.json").read_text())
    repo = payload.get("repository")
    if repo:
        repo.update({"full_name": upstream, "name": upstream.split("/")[1], "id": UPSTREAM_ID})
        repo.get("owner", {}).update({"login": upstream.split("/")[0]})
    base = (payload.get("pull_request") or {}).get("base")
    if base and base.get("repo"):
        base["repo"].update({"full_name": upstream, "id": UPSTREAM_ID})
    return payload


def sign(body: bytes, secret: str = WEBHOOK_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_headers(event: str, body: bytes, delivery_id: str | None = None, secret: str = WEBHOOK_SECRET) -> dict:
    return {
        "HTTP_X_GITHUB_EVENT": event,
        "HTTP_X_GITHUB_DELIVERY": delivery_id or str(uuid.uuid4()),
        "HTTP_X_HUB_SIGNATURE_256": sign(body, secret),
        "HTTP_X_GITHUB_HOOK_ID": "292430182",
        "HTTP_X_GITHUB_HOOK_INSTALLATION_TARGET_TYPE": "integration",
        "HTTP_USER_AGENT": "GitHub-Hookshot/044aadd",
    }


@pytest.fixture(scope="session", autouse=True)
def _static_files_by_plain_name():
    """Production serves hashed, compressed names from `collectstatic`'s manifest; tests render
    pages without collecting first, so they use plain names (tests/test_static_files.py runs the
    real manifest pipeline)."""
    from django.test.utils import override_settings

    with override_settings(
        STORAGES={
            "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
            "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
        }
    ):
        yield


@pytest.fixture
def relay_settings(settings):
    settings.GITHUB_WEBHOOK_SECRET = WEBHOOK_SECRET
    settings.CRCR_UPSTREAM_REPO = UPSTREAM
    settings.CRCR_UPSTREAM_REPO_ID = None
    return settings


@pytest.fixture
def post_webhook(client, relay_settings):
    """Send a payload the way GitHub does, signed over the exact bytes."""

    def post(event: str, payload: dict | bytes, delivery_id: str | None = None, **extra):
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {**webhook_headers(event, body, delivery_id), **extra}
        content_type = headers.pop("content_type", "application/json")
        return client.post("/github/webhook", data=body, content_type=content_type, **headers)

    return post


@pytest.fixture
def standin(settings):
    """The local GitHub stand-in over real HTTP, with the relay pointed at it."""
    from devtools.standin import StandIn
    from relay.github import client as github

    stand = StandIn(app_id=1001).start()
    settings.GITHUB_API_URL = stand.url
    settings.CRCR_REFERENCE_ARTIFACT_BASE = stand.s3_url()
    settings.GITHUB_APP_ID = "1001"
    settings.GITHUB_APP_PRIVATE_KEY = stand.app_private_key_pem
    github.reset_http_client()
    from django.core.cache import cache

    cache.clear()
    yield stand
    stand.stop()
    github.reset_http_client()


@pytest.fixture
def oidc(standin, settings):
    """The stand-in as the only trusted OIDC issuers (GitHub-, Buildkite- and GitLab-shaped)."""
    from relay.callbacks import oidc as relay_oidc

    settings.CRCR_OIDC_ISSUERS = standin.oidc.issuers_config()
    settings.CRCR_OIDC_JWKS_COOLDOWN_SECONDS = 0
    relay_oidc.reset_clients()
    yield standin.oidc
    relay_oidc.reset_clients()


def action_body(
    client_payload: dict,
    status: str,
    conclusion: str | None = None,
    *,
    run_id="4242",
    attempt="1",
    job="build",
    **extra,
) -> dict:
    """Exactly the body the existing cross-repo-ci-relay-callback action builds (relay.md §7.2)."""
    now = "2026-12-02T10:48:28.123456Z"
    workflow = {
        "schema_version": "1",
        "status": status,
        "conclusion": conclusion if status == "completed" else None,
        "name": "xpu-ci",
        "url": f"https://github.com/intel/torch-xpu-ops/actions/runs/{run_id}",
        "run_attempt": attempt,
        "job_name": job,
        "check_run_id": f"{run_id}-{attempt}",
        "run_id": run_id,
        "started_at": now if status == "in_progress" else None,
        "completed_at": None if status == "in_progress" else now,
    }
    workflow.update(extra)
    return {**client_payload, "workflow": workflow}


def callback_post(client, body: dict, token: str):
    """POST a body to /github/callback as the callback action does: JSON, the OIDC token as bearer."""
    return client.post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def callback_sender(client, oidc, repository: str, repository_id: int):
    """`send(body, token=None, **claims)`: a callback from `repository`'s GitHub Actions job, with a
    fresh OIDC token each time unless `token` is given (`claims` override the token's)."""

    def send(body: dict, token: str | None = None, **claims):
        claims = {"repository": repository, "repository_id": repository_id, **claims}
        claims["repository_id"] = str(claims["repository_id"])
        return callback_post(client, body, token or oidc.mint(**claims))

    return send


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser():
    """One Debian Chromium for the whole session (Playwright's sync API allows one running
    instance per thread). Skipped when Chromium is missing, unless CRCR_REQUIRE_BROWSER=1."""
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is not installed (apt-get install chromium)"
        if os.environ.get("CRCR_REQUIRE_BROWSER") == "1":
            pytest.fail(message + " and CRCR_REQUIRE_BROWSER=1")
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    # The sync API runs an event loop in the test thread; the ORM calls that fixtures make from
    # that thread are still synchronous.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    playwright = sync_playwright().start()
    chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
    yield chromium
    chromium.close()
    playwright.stop()


@pytest.fixture(autouse=True)
def _registry_lookups_forgotten():
    """Each test registers its own projects (ids reused after a flush): no callback may be
    answered from an earlier test's remembered registry."""
    from relay.callbacks.identity import project_lookups_forget

    project_lookups_forget()
    yield
    project_lookups_forget()


@pytest.fixture(autouse=True)
def _cache_forgotten():
    """Each test starts from an empty cache (Redis in CI): the API throttle's counters are keyed
    by client address and token id, and token ids repeat after a rollback, so a sweep's hundreds
    of requests left the next test's API calls answered 429 within the same minute."""
    from django.core.cache import cache

    try:
        cache.clear()
    except Exception:  # noqa: BLE001 - a test without a reachable cache has nothing to forget
        pass


@pytest.fixture(autouse=True)
def upstream_reactions_inline(settings):
    """No worker runs in most tests: check-run/gate/oncall reactions happen in the test's own
    process. Tests of the deferred path turn this off."""
    settings.CRCR_UPSTREAM_REACT_INLINE = True


@pytest.fixture(autouse=True)
def level_sample_of_one(settings):
    """Most tests judge level criteria on a handful of jobs made a moment ago: they test the
    criteria, not the minimum sample, which tests/relay/levels/test_criteria_sample.py sets back to
    production's 20 jobs over 3 days."""
    settings.CRCR_LEVEL_MIN_JOBS, settings.CRCR_LEVEL_MIN_DATA_HOURS = 1, 0


@pytest.fixture
def fresh_tallies(monkeypatch):
    """The tallies are cached per bucket; a test using this starts from the database, with time
    enough to fill a cold window (the loading state that a spent budget gives is tested on its own)."""
    from django.core.cache import cache

    from relay.tallies import buckets

    monkeypatch.setattr(buckets, "COMPUTE_BUDGET_SECONDS", 60)
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def wsgi_direct():
    """For a test that calls a WSGI application itself: as Django's test client does, the
    connection checks Django runs on request_started and request_finished stay out, so a
    connection that an earlier test left open in this thread is not touched (touching it needs
    the database access this test has not asked for)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)
