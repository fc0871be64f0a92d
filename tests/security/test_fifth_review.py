"""The fifth outside review's findings (issue 52) that this file holds, each from the request
the review sent: a control character in a stored test name that took three pages down once
muted, a backend scope any token-minting staff member could grant themselves, a metrics server
one idle connection blocked, API writes nested deep enough to recurse, the mutes API reading
other scripts' digits, and a commit page of 7.7 MB. The sweeps that look for the next value of
each class are test_hostile_sweep.py and tests/reliability/test_hostile_input.py."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from api.models import ApiToken
from relay.models import TestMute
from tests.factories import ProjectFactory
from tests.security.hostile_values import nested

pytestmark = pytest.mark.django_db
ADDMM = "test_ops.TestCommon.test_addmm_float32"


def token_client(user, scopes) -> APIClient:
    _, raw = ApiToken.issue(user, f"{user.get_username()}'s token", scopes)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    return client


def superuser_client(name: str = "root") -> APIClient:
    return token_client(get_user_model().objects.create_superuser(name, f"{name}@example.org", None), ["admin"])


def mute_body(**fields) -> dict:
    return {"backend": "intel/torch-xpu-ops", "test_id": ADDMM, "reason": "upstream #1", "owner": "oncall", **fields}


# --- 7. one JSON depth rule for every JSON body -------------------------------------------------------


@pytest.mark.parametrize("depth", [65, 1_000, 5_000])
def test_an_api_write_nested_past_the_limit_is_a_400_not_a_500(depth):
    ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    client = superuser_client()
    body = b'{"backend": "intel/torch-xpu-ops", "test_id": "x", "reason": ' + nested(depth) + b"}"
    for url in ("/api/v1/mutes", "/api/v1/projects/", "/api/v1/known-issues/"):
        response = client.post(url, data=body, content_type="application/json")
        assert response.status_code == 400, (url, response.status_code)
        assert "nested deeper than 64 levels" in response.json()["detail"], url
    assert not TestMute.objects.exists()


@pytest.mark.parametrize("text", ['{"reason": NaN}', '{"reason": 1e999}', '{"reason": "a\\u0000b"}'])
def test_an_api_write_with_what_no_column_stores_is_a_400(text):
    response = superuser_client().post("/api/v1/mutes", data=text, content_type="application/json")
    assert response.status_code == 400


def test_every_api_view_reads_json_through_the_one_reader():
    from django.urls import get_resolver
    from rest_framework.parsers import JSONParser as DrfJsonParser

    from api.parsers import JSONParser

    def views(patterns):
        for pattern in patterns:
            if hasattr(pattern, "url_patterns"):
                yield from views(pattern.url_patterns)
            else:
                yield getattr(pattern.callback, "cls", None)

    for view in filter(None, views(get_resolver().url_patterns)):
        for parser in getattr(view, "parser_classes", []):
            assert not issubclass(parser, DrfJsonParser) or issubclass(parser, JSONParser), (view, parser)


# --- 8. numbers and dates from outside: ASCII digits only ---------------------------------------------

OTHER_DIGITS = {"Arabic-Indic": "٠١٢٣٤٥٦٧٨٩", "fullwidth": "０１２３４５６７８９", "superscript": "⁰¹²³⁴⁵⁶⁷⁸⁹"}


def spelled(text: str, digits: str) -> str:
    return "".join(digits[int(c)] if c.isascii() and c.isdigit() else c for c in text)


@pytest.fixture
def xpu():
    return ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")


@pytest.mark.parametrize("digits", OTHER_DIGITS.values(), ids=OTHER_DIGITS.keys())
def test_the_mutes_api_reads_days_in_ascii_digits_only(xpu, digits):
    client = superuser_client()
    assert client.post("/api/v1/mutes", mute_body(days=spelled("3", digits)), format="json").status_code == 400
    created = client.post("/api/v1/mutes", mute_body(days="3"), format="json")
    assert created.status_code == 201
    pk = created.json()["id"]
    assert client.post(f"/api/v1/mutes/{pk}/extend", {"days": spelled("3", digits)}, format="json").status_code == 400


@pytest.mark.parametrize("digits", OTHER_DIGITS.values(), ids=OTHER_DIGITS.keys())
def test_the_mutes_api_reads_dates_in_ascii_digits_only(xpu, digits):
    from django.utils import timezone

    client = superuser_client()
    stamp = (timezone.now() + timezone.timedelta(days=5)).strftime("%Y-%m-%dT%H:%M:%S+00:00")
    refused = client.post("/api/v1/mutes", mute_body(expires_at=spelled(stamp, digits)), format="json")
    assert refused.status_code == 400 and "expires_at" in refused.json()["errors"]
    created = client.post("/api/v1/mutes", mute_body(expires_at=stamp), format="json")
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    changed = client.post(f"/api/v1/mutes/{pk}/extend", {"expires_at": spelled(stamp, digits)}, format="json")
    assert changed.status_code == 400


def test_every_number_and_date_an_api_write_takes_is_read_by_the_ascii_readers():
    import inspect

    from rest_framework import serializers

    import api.serializers
    import api.serializers_triage
    import api.views_bisections
    import api.views_mutes
    from api.serializers import AsciiDateTimeField, AsciiIntegerField

    loose = (serializers.IntegerField, serializers.FloatField, serializers.DecimalField, serializers.DateField)
    loose += (serializers.DateTimeField, serializers.DurationField, serializers.TimeField)
    modules = (api.serializers, api.serializers_triage, api.views_mutes, api.views_bisections)
    inputs = [
        cls
        for module in modules
        for name, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, serializers.Serializer) and name.endswith("In")
    ]
    assert len(inputs) >= 8
    for cls in inputs:
        for name, field in cls().fields.items():
            if isinstance(field, loose) and not field.read_only:
                assert isinstance(field, AsciiIntegerField | AsciiDateTimeField), (cls.__name__, name)


# --- 6. every server the project starts: threaded and time-limited ------------------------------------


def _served_while_one_connection_idles(address: tuple, path: str = "/nope") -> int:
    """Open a connection that sends nothing, then ask `path` on a second one: its status."""
    import http.client
    import socket

    idle = socket.create_connection(address, timeout=5)
    try:
        asking = http.client.HTTPConnection(*address, timeout=5)
        asking.request("GET", path)
        return asking.getresponse().status
    finally:
        idle.close()


def _closed_within(address: tuple, seconds: float) -> bool:
    """Whether the server closes a connection that sends nothing within `seconds`."""
    import socket

    idle = socket.create_connection(address, timeout=seconds + 5)
    try:
        return idle.recv(100) == b""
    except TimeoutError:
        return False
    finally:
        idle.close()


@pytest.fixture
def metrics_server(monkeypatch):
    import threading

    from hud.management.commands import metrics_serve

    monkeypatch.setattr(metrics_serve.QuietHandler, "timeout", 0.5)
    server = metrics_serve.metrics_server("127.0.0.1:0")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_one_idle_connection_does_not_block_metrics_serve(metrics_server):
    assert _served_while_one_connection_idles(metrics_server.server_address[:2]) == 404


def test_metrics_serve_closes_a_connection_that_sends_nothing(metrics_server):
    import time

    started = time.monotonic()
    assert _closed_within(metrics_server.server_address[:2], 3)
    assert time.monotonic() - started < 3


@pytest.mark.parametrize(
    "bind", ["127.0.0.1:٣", "127.0.0.1:³", "127.0.0.1:９４６４", "127.0.0.1:+1", ":9464", "127.0.0.1:"]
)
def test_metrics_serve_reads_its_port_in_ascii_digits_only(bind):
    from django.core.management.base import CommandError

    from hud.management.commands.metrics_serve import bind_address

    with pytest.raises(CommandError, match="ASCII digits"):
        bind_address(bind)


def test_metrics_serve_takes_an_ipv6_address_in_brackets():
    import socket

    from hud.management.commands import metrics_serve

    assert metrics_serve.bind_address("[::1]:9464") == ("::1", 9464)
    assert metrics_serve.bind_address("0.0.0.0:9464") == ("0.0.0.0", 9464)
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this host")
    try:
        server = metrics_serve.metrics_server("[::1]:0")
    except Exception as exc:  # a host without a v6 loopback
        pytest.skip(f"no [::1] here: {exc}")
    assert server.address_family == socket.AF_INET6
    server.server_close()


def test_the_stand_in_and_the_sandbox_sink_serve_past_an_idle_connection(tmp_path):
    from devtools.standin.sandbox import NotificationSink
    from devtools.standin.server import StandIn

    standin = StandIn().start()
    try:
        host, port = standin._server.server_address[:2]
        assert _served_while_one_connection_idles((host, port), "/_standin/nothing") < 500
    finally:
        standin.stop()
    sink = NotificationSink(tmp_path)
    import threading

    threading.Thread(target=sink.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        assert _served_while_one_connection_idles(sink.server.server_address[:2]) == 501
    finally:
        sink.server.shutdown()
        sink.server.server_close()


SERVERS = {
    "hud/management/commands/metrics_serve.py": "test_one_idle_connection_does_not_block_metrics_serve",
    "devtools/standin/server.py": "test_the_stand_in_and_the_sandbox_sink_serve_past_an_idle_connection",
    "devtools/standin/sandbox.py": "test_the_stand_in_and_the_sandbox_sink_serve_past_an_idle_connection",
}
"""Every module that starts an HTTP server of its own (gunicorn's settings: crcr/gunicorn_conf.py,
held by test_slow_clients.py), each with the test that holds it threaded and time-limited."""


def test_every_server_the_project_starts_is_listed_threaded_and_time_limited():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    starts = ("make_server(", "HTTPServer(", "TCPServer(", "WSGIServer(", "serve_forever(")
    found = {
        str(path.relative_to(root))
        for package in ("crcr", "relay", "hud", "api", "devtools", "client")
        for path in (root / package).rglob("*.py")
        if any(start in path.read_text() for start in starts)
    }
    assert found == set(SERVERS), "a new server: make it threaded with a read timeout, then list it here"
    for module in SERVERS:
        source = (root / module).read_text()
        assert "timeout = " in source and ("Threading" in source or "threaded=True" in source), module
