"""The machine endpoints (/github/webhook, /github/callback) go through crcr.machine's lean
handler in the WSGI application gunicorn serves, and answer exactly as the full stack would;
every other URL keeps the pages' middleware."""

import json

import pytest
from django.db import OperationalError
from django.test import RequestFactory, override_settings
from django.urls import reverse

from crcr.machine import machine_match
from crcr.wsgi import application, pages

pytestmark = pytest.mark.usefixtures("wsgi_direct")


def call(app, method: str, path: str, body: bytes = b"", **headers) -> tuple[int, dict, bytes]:
    factory = RequestFactory()
    request = getattr(factory, method.lower())(path, data=body, content_type="application/json", **headers)
    answer = {}

    def start_response(status, response_headers, exc_info=None):
        answer["status"], answer["headers"] = int(status.split()[0]), dict(response_headers)

    response = application_call(app, request.environ, start_response)
    return answer["status"], answer["headers"], response


def application_call(app, environ, start_response) -> bytes:
    response = app(environ, start_response)
    try:
        return b"".join(response)
    finally:
        response.close()


@pytest.mark.parametrize("path", ["/github/callback", "/github/callback/", "/github/webhook", "/github/webhook/"])
def test_the_webhook_and_the_callback_are_machine_paths(path):
    assert machine_match(path) is not None


@pytest.mark.parametrize("path", ["/", "/github/callbacks", "/api/v1/jobs", "/admin/", "/healthz", "/github/"])
def test_pages_api_and_health_are_not(path):
    assert machine_match(path) is None


def test_a_callback_skips_the_pages_middleware():
    status, headers, _ = call(application, "POST", "/github/callback", b"{}", HTTP_AUTHORIZATION="Bearer x")
    assert status == 401
    assert "Cookie" not in headers.get("Vary", "") and "Set-Cookie" not in headers
    assert headers["X-Content-Type-Options"] == "nosniff"  # SecurityMiddleware still runs


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/github/callback", b"{}"),
        ("POST", "/github/callback", b"[" * 100),
        ("GET", "/github/callback", b""),
        ("POST", "/github/webhook", b"{}"),
        ("POST", "/github/webhook/", b"not json"),
    ],
)
def test_every_machine_answer_carries_the_pages_csp_and_x_frame_options(method, path, body):
    """docs/security.md promises both on every response (issue 45, item 7)."""
    status, machine, _ = call(application, method, path, body, HTTP_AUTHORIZATION="Bearer x")
    _, page, _ = call(application, "GET", "/healthz")
    assert machine["Content-Security-Policy"] == page["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in machine["Content-Security-Policy"]
    assert machine["X-Frame-Options"] == page["X-Frame-Options"] == "DENY"


def test_a_machine_answer_says_its_length_so_it_is_not_sent_chunked():
    status, headers, body = call(application, "POST", "/github/callback", b"{}", HTTP_AUTHORIZATION="Bearer x")
    assert status == 401
    assert headers["Content-Length"] == str(len(body))


def test_a_page_keeps_the_pages_middleware():
    status, headers, _ = call(application, "GET", "/favicon.ico")
    assert status == 302
    assert "Content-Security-Policy" in headers
    assert headers["X-Frame-Options"] == "DENY"


@pytest.mark.parametrize(
    "method,path,body,headers",
    [
        ("GET", "/github/callback", b"", {}),
        ("POST", "/github/callback", b"{not json", {"HTTP_AUTHORIZATION": "Bearer x"}),
        ("POST", "/github/callback", b"{}", {}),
        ("POST", "/github/callback", b'{"a": NaN}', {"HTTP_AUTHORIZATION": "Bearer x"}),
        ("POST", "/github/webhook", b"{}", {"HTTP_X_GITHUB_EVENT": "ping"}),
        ("GET", "/github/webhook/", b"", {}),
    ],
)
def test_the_lean_handler_answers_as_the_full_stack_does(method, path, body, headers):
    lean = call(application, method, path, body, **headers)
    full = call(pages, method, path, body, **headers)
    assert lean[0] == full[0]
    assert json.loads(lean[2]) == json.loads(full[2])
    assert lean[1]["Content-Type"] == full[1]["Content-Type"] == "application/json"
    assert lean[1]["Content-Length"] == full[1]["Content-Length"]


@override_settings(ALLOWED_HOSTS=["relay.example.org"])
def test_a_host_outside_allowed_hosts_is_refused_on_machine_paths_too():
    status, _, _ = call(application, "POST", "/github/callback", b"{}", HTTP_HOST="evil.example.com")
    assert status == 400


def test_a_database_outage_is_a_503_with_retry_after_on_machine_paths(monkeypatch):
    def database_down(*args):
        raise OperationalError("connection refused")

    monkeypatch.setattr("relay.views.callback_receive", database_down)
    status, headers, body = call(application, "POST", "/github/callback", b"{}", HTTP_AUTHORIZATION="Bearer x")
    assert status == 503
    assert headers["Retry-After"] == "5"
    assert json.loads(body)["detail"].startswith("database unavailable")


def test_reverse_still_names_every_url_during_a_machine_request(monkeypatch):
    from relay.callbacks.receive import CallbackResult

    def names_a_page(*args):
        return CallbackResult(200, {"ok": True, "status": reverse("healthz")})

    monkeypatch.setattr("relay.views.callback_receive", names_a_page)
    status, _, body = call(application, "POST", "/github/callback", b"{}", HTTP_AUTHORIZATION="Bearer x")
    assert (status, json.loads(body)["status"]) == (200, "/healthz")


def test_a_machine_request_resolves_its_path_once(monkeypatch):
    from django.urls.resolvers import URLResolver

    resolved = []
    real = URLResolver.resolve
    monkeypatch.setattr(URLResolver, "resolve", lambda self, path: resolved.append(path) or real(self, path))
    status, _, _ = call(application, "POST", "/github/callback", b"{}", HTTP_AUTHORIZATION="Bearer x")
    assert status == 401
    assert resolved.count("/github/callback") == 1
