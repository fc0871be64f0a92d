"""Security properties that hold across the whole flow: CSRF on every admin form (and on session
writes to the API), artifact and log URLs that the server never fetches, secrets that never reach
a log line, and `manage.py check --deploy` clean with production settings."""

import copy
import json
import logging
import re
import secrets
import socket
import subprocess
import sys
import threading

import pytest
from django.test import Client

from tests.conftest import UPSTREAM, fixture_payload

from .conftest import ROOT, base_env, callback_body

pytestmark = pytest.mark.timeout(120)
ADMIN_PASSWORD = "security-admin-Pa55word-long"


# --- CSRF ---------------------------------------------------------------------------------------------


@pytest.fixture
def admin_client(db):
    """A logged-in superuser whose client enforces CSRF like a browser does."""
    from django.contrib.auth import get_user_model

    from tests.factories import DeliveryFactory, ProjectFactory

    user = get_user_model().objects.create_superuser("csrf-admin", "csrf@example.org", ADMIN_PASSWORD)
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return {
        "client": client,
        "user": user,
        "project": ProjectFactory(full_name="csrf/backend", level="L2"),
        "delivery": DeliveryFactory(guid="csrf-delivery"),
    }


def admin_posts(world) -> dict[str, dict]:
    project, delivery = world["project"], world["delivery"]
    return {
        "/admin/relay/project/add/": {
            "full_name": "csrf/new",
            "level": "L1",
            "hardware_kind": "gpu",
            "ci_provider": "github",
            "position": "0",
            "level_change_reason": "csrf probe",
            "oncalls": "[]",
            "oidc_required_claims": "{}",
        },
        f"/admin/relay/project/{project.pk}/change/": {
            "full_name": project.full_name,
            "level": "L4",
            "level_change_reason": "csrf probe",
        },
        "/admin/relay/project/": {"action": "deactivate_selected", "_selected_action": [str(project.pk)]},
        f"/admin/relay/project/{project.pk}/delete/": {"post": "yes"},
        "/admin/relay/delivery/": {
            "action": "redispatch",
            "_selected_action": [str(delivery.pk)],
            "apply": "1",
            "projects": [str(project.pk)],
        },
        "/admin/api/apitoken/add/": {"user": str(world["user"].pk), "name": "csrf probe", "scopes": '["admin"]'},
        "/admin/auth/user/add/": {"username": "csrf-new-admin", "password1": "x" * 20, "password2": "x" * 20},
        f"/admin/auth/user/{world['user'].pk}/password/": {"password1": "y" * 20, "password2": "y" * 20},
        "/admin/logout/": {},
    }


def test_every_admin_form_refuses_a_post_without_the_csrf_token(admin_client):
    from relay.models import Dispatch, Project

    client = admin_client["client"]
    answers = {url: client.post(url, data).status_code for url, data in admin_posts(admin_client).items()}
    assert answers == dict.fromkeys(answers, 403), answers
    project = Project.objects.get(pk=admin_client["project"].pk)
    assert (project.level, project.active) == ("L2", True) and not Project.objects.filter(full_name="csrf/new").exists()
    assert not Dispatch.objects.filter(delivery=admin_client["delivery"]).exists()


def test_the_admin_login_form_refuses_a_post_without_the_csrf_token(db):
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser("csrf-login", "l@example.org", ADMIN_PASSWORD)
    client = Client(enforce_csrf_checks=True)
    assert client.post("/admin/login/", {"username": "csrf-login", "password": ADMIN_PASSWORD}).status_code == 403
    assert "_auth_user_id" not in client.session


def test_admin_forms_work_with_the_token_so_the_refusals_are_about_csrf(admin_client):
    from relay.models import Project

    client = admin_client["client"]
    page = client.get("/admin/relay/project/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    response = client.post(
        "/admin/relay/project/",
        {
            "action": "deactivate_selected",
            "_selected_action": [str(admin_client["project"].pk)],
            "csrfmiddlewaretoken": token,
        },
    )
    assert response.status_code == 302
    assert Project.objects.get(pk=admin_client["project"].pk).active is False


def test_session_writes_to_the_api_need_the_csrf_token(admin_client):
    client = admin_client["client"]
    body = {"full_name": "csrf/api-new", "level": "L1", "reason": "csrf probe"}
    response = client.post("/api/v1/projects/", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 403 and "csrf" in response.content.decode().lower()


# --- artifact and log URLs are links, never fetched -------------------------------------------------------


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection made to it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.connections.append(conn.recv(2048))
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                except OSError:
                    self.connections.append(b"")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self):
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def relayed(db, standin, oidc, post_webhook, relay_settings, django_capture_on_commit_callbacks, monkeypatch):
    """The relay against the stand-in with Celery kicks replaced by direct calls: a PR delivery
    dispatched to an L4 and an L2 backend, and the upstream installed for check runs."""
    from relay.dispatch import fan_out
    from relay.dispatch import sending as dispatching
    from relay.github import writes
    from relay.models import Delivery, Dispatch
    from tests.factories import ProjectFactory

    monkeypatch.setattr(fan_out, "_kick_fan_out", lambda pk: None)
    monkeypatch.setattr(writes, "write_kick", lambda pk, countdown=0.0: None)
    standin.add_installation(installation_id=1, account="pytorch")
    standin.add_repo(UPSTREAM, repo_id=65600975, installation_id=1)
    standin.add_installation(installation_id=7, account="downstream")
    projects = []
    for n, level in enumerate(("L4", "L2")):
        name = f"sec-org-{n}/backend"
        standin.add_repo(name, repo_id=9100 + n, installation_id=7)
        projects.append(ProjectFactory(full_name=name, github_repo_id=9100 + n, level=level))
    payload = fixture_payload("pull_request.opened")
    with django_capture_on_commit_callbacks(execute=True):
        response = post_webhook("pull_request", payload)
    assert response.status_code == 202, response.content
    delivery = Delivery.objects.get(guid=response.json()["delivery"])
    for pk in Dispatch.objects.filter(delivery=delivery).values_list("pk", flat=True):
        with django_capture_on_commit_callbacks(execute=True):
            assert dispatching.dispatch_send(pk) == "sent"
    return {"delivery": delivery, "projects": projects, "payload": payload}


def drain_writes(capture) -> int:
    from django.utils import timezone

    from relay.checks.outbox import write_send
    from relay.models import UpstreamWrite

    sent = 0
    for _ in range(20):
        due = list(
            UpstreamWrite.objects.filter(
                state__in=UpstreamWrite.UNSENT_STATES, next_attempt_at__lte=timezone.now()
            ).values_list("pk", flat=True)
        )
        if not due:
            break
        for pk in due:
            with capture(execute=True):
                sent += write_send(pk) is not None
    return sent


def post_callback(client, oidc, project, body: dict, token: str | None = None):
    token = token or oidc.mint(repository=project.full_name, repository_id=str(project.github_repo_id))
    return client.post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def test_artifact_and_log_urls_are_never_fetched_by_the_server(
    client, relayed, standin, oidc, listener, django_capture_on_commit_callbacks
):
    from relay.dispatch import sending as dispatching
    from relay.dispatch.results_sweep import results_sweep
    from relay.models import Dispatch, JobRun

    delivery = relayed["delivery"]
    head = relayed["payload"]["pull_request"]["head"]["sha"]
    for n, project in enumerate(relayed["projects"]):
        dispatch = Dispatch.objects.get(delivery=delivery, project=project)
        echoed = dispatching.dispatch_client_payload(dispatch)
        for status in ("in_progress", "completed"):
            body = {
                **echoed,
                "workflow": callback_body(delivery.guid, status, run_id=f"31{n}", job="test", conclusion="failure")[
                    "workflow"
                ],
            }
            body["workflow"].update(
                url=listener.url(f"/logs/{n}/{status}"),
                artifact_url=listener.url(f"/artifacts/{n}.zip"),
                failed_tests=[
                    {"name": "test_x", "message": f"see {listener.url('/trace')}", "file": listener.url("/file.py")}
                ],
                environment={"log": listener.url("/env-log")},
            )
            with django_capture_on_commit_callbacks(execute=True):
                response = post_callback(client, oidc, project, body)
            assert response.status_code == 200, response.content
    drain_writes(django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        results_sweep()
    assert JobRun.objects.filter(artifact_url__startswith=listener.url("/")).count() == 2
    l4 = relayed["projects"][0]
    pages = [
        "/",
        f"/commit/{head}",
        f"/pr/{delivery.pr_number}",
        "/crcr",
        f"/crcr/{l4.full_name}",
        "/crcr/metrics",
        "/relay/deliveries",
        "/api/v1/jobs/",
        f"/api/v1/jobs/{JobRun.objects.filter(project=l4).first().pk}/",
        f"/api/v1/commits/{head}/",
    ]
    statuses = {url: client.get(url).status_code for url in pages}
    assert all(code < 500 for code in statuses.values()), statuses
    assert listener.connections == [], f"the server fetched a reported URL: {listener.connections[:3]}"
    # The check runs written upstream never link a reported run on a host the project's CI
    # provider does not own (relay.policy.run_links): the listener's URL is nowhere in them.
    writes = standin.requests("POST", r"/repos/pytorch/pytorch/check-runs.*") + standin.requests(
        "PATCH", r"/repos/pytorch/pytorch/check-runs.*"
    )
    assert writes and not any(listener.url("/logs/") in json.dumps(r.json) for r in writes)


# --- secrets never logged -------------------------------------------------------------------------------


class Capture(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
        self.lines: list[str] = []

    def emit(self, record):
        try:
            self.lines.append(self.format(record) + repr(getattr(record, "args", "")))
        except Exception as exc:  # noqa: BLE001 - a record that cannot be formatted is still evidence
            self.lines.append(f"unformattable record {record.name}: {exc!r} {record.msg!r} {record.args!r}")


@pytest.fixture
def everything_logged():
    """Every logger at DEBUG (httpx and httpcore too), everything captured with tracebacks."""
    capture = Capture()
    root = logging.getLogger()
    loggers = [root] + [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)]
    levels = {lg: lg.level for lg in loggers}
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
    root.addHandler(capture)
    yield capture
    root.removeHandler(capture)
    for lg, level in levels.items():
        lg.setLevel(level)


def test_secrets_never_reach_the_logs(
    client,
    relayed,
    standin,
    oidc,
    everything_logged,
    post_webhook,
    settings,
    monkeypatch,
    django_capture_on_commit_callbacks,
):
    from django.contrib.auth import get_user_model

    from api.models import ApiToken
    from relay.dispatch import sending as dispatching
    from relay.github import client as github
    from relay.models import Dispatch
    from tests.conftest import WEBHOOK_SECRET, webhook_headers

    minted_jwts: list[str] = []
    real_app_jwt = github.app_jwt
    monkeypatch.setattr(github, "app_jwt", lambda *a, **k: minted_jwts.append(real_app_jwt(*a, **k)) or minted_jwts[-1])
    oidc_tokens: list[str] = []

    def token(project, **claims):
        oidc_tokens.append(oidc.mint(repository=project.full_name, repository_id=str(project.github_repo_id), **claims))
        return oidc_tokens[-1]

    # Webhooks: good, badly signed, redelivered, installation.
    payload = copy.deepcopy(relayed["payload"])
    payload["pull_request"]["head"]["sha"] = "c" * 40
    payload["action"] = "synchronize"
    with django_capture_on_commit_callbacks(execute=True):
        assert post_webhook("pull_request", payload, delivery_id="sec-sync").status_code == 202
        assert post_webhook("pull_request", payload, delivery_id="sec-sync").status_code == 200
        body = json.dumps(payload).encode()
        bad = {**webhook_headers("pull_request", body), "HTTP_X_HUB_SIGNATURE_256": "sha256=" + "0" * 64}
        assert client.post("/github/webhook", data=body, content_type="application/json", **bad).status_code == 401
        assert post_webhook("installation", fixture_payload("installation.created")).status_code in (200, 202)
    # Dispatches: a GitHub 401 (token refresh), a 502, then success.
    standin.fail("POST", r"/repos/.*/dispatches", status=401, times=1)
    standin.fail("POST", r"/repos/.*/dispatches", status=502, times=1)
    for pk in Dispatch.objects.filter(delivery__guid="sec-sync").values_list("pk", flat=True):
        for _ in range(3):
            Dispatch.objects.filter(pk=pk).update(next_attempt_at=Dispatch.objects.get(pk=pk).created_at)
            with django_capture_on_commit_callbacks(execute=True):
                if dispatching.dispatch_send(pk) == "sent":
                    break
    # Callbacks: accepted, replayed token, forged token, wrong audience, for a delivery never dispatched.
    delivery = relayed["delivery"]
    l4, l2 = relayed["projects"]
    echoed = dispatching.dispatch_client_payload(Dispatch.objects.get(delivery=delivery, project=l4))
    accepted = {
        **echoed,
        "workflow": callback_body(delivery.guid, "in_progress", run_id="77", job="t")["workflow"],
    }
    with django_capture_on_commit_callbacks(execute=True):
        first = token(l4)
        assert post_callback(client, oidc, l4, accepted, first).status_code == 200
        completed = {**accepted, "workflow": {**accepted["workflow"], "status": "completed", "conclusion": "success"}}
        assert post_callback(client, oidc, l4, completed, first).status_code == 401  # jti replay
        forged = first.rsplit(".", 1)[0] + "." + "A" * 342
        assert post_callback(client, oidc, l4, completed, forged).status_code == 401
        assert post_callback(client, oidc, l4, completed, token(l4, aud="someone-else")).status_code == 401
        assert post_callback(client, oidc, l4, completed, token(l4, key="unknown")).status_code == 401
        assert post_callback(client, oidc, l2, {**accepted, "delivery_id": "never-sent"}, token(l2)).status_code == 403
        assert post_callback(client, oidc, l4, completed, token(l4)).status_code == 200
    drain_writes(django_capture_on_commit_callbacks)
    # The API: a personal token used for a write, a bad one, a revoked one.
    admin = get_user_model().objects.create_superuser("sec-admin", "s@example.org", "x" * 24)
    _, raw = ApiToken.issue(admin, "sec", ["admin"])
    _, revoked_raw = ApiToken.issue(admin, "revoked", ["admin"])
    ApiToken.objects.filter(name="revoked").update(revoked_at="2026-01-01T00:00:00Z")
    api_body = json.dumps({"full_name": "sec-org/api-new", "level": "L1", "reason": "security test"})
    assert (
        client.post(
            "/api/v1/projects/", data=api_body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}"
        ).status_code
        == 201
    )
    for bad_token in (revoked_raw, raw[:-3] + "xyz"):
        assert (
            client.post(
                "/api/v1/projects/",
                data=api_body,
                content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {bad_token}",
            ).status_code
            == 401
        )

    installation_tokens = list(standin.world.tokens)
    key_lines = [line for line in standin.app_private_key_pem.splitlines() if len(line) >= 40]
    secrets_to_find = {
        "webhook secret": [WEBHOOK_SECRET],
        "App private key": [standin.app_private_key_pem, *key_lines],
        "App JWT": minted_jwts,
        "installation token": installation_tokens,
        "OIDC token": oidc_tokens + [t.rsplit(".", 1)[1] for t in oidc_tokens] + [forged],
        "API token": [raw, revoked_raw, raw[:-3] + "xyz"],
    }
    assert minted_jwts and installation_tokens and len(oidc_tokens) >= 5 and len(everything_logged.lines) > 20
    logged = "\n".join(everything_logged.lines)
    leaks = {
        kind: sum(value in logged for value in values)
        for kind, values in secrets_to_find.items()
        if any(value in logged for value in values)
    }
    assert not leaks, f"secrets in the logs: {leaks}"


# --- manage.py check --deploy ----------------------------------------------------------------------------


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    env = base_env(tmp_path, f"sqlite:///{tmp_path / 'deploy.sqlite3'}")
    env.update(
        DEBUG="0",
        SECRET_KEY=secrets.token_urlsafe(64),
        ALLOWED_HOSTS="hud.example.org",
        SECURE_SSL_REDIRECT="1",
        SECURE_COOKIES="1",
        SECURE_HSTS_SECONDS="31536000",
        BEHIND_TLS_PROXY="1",
        CRCR_PUBLIC_URL="https://hud.example.org",
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
