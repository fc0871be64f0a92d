"""The fifth outside review's findings (issue 52) that this file holds, each from the request
the review sent: a control character in a stored test name that took three pages down once
muted, a backend scope any token-minting staff member could grant themselves, a metrics server
one idle connection blocked, API writes nested deep enough to recurse, the mutes API reading
other scripts' digits, and a commit page of 7.7 MB. The sweeps that look for the next value of
each class are test_hostile_sweep.py and tests/reliability/test_hostile_input.py."""

import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from api.models import ApiToken, backend_scope
from relay.models import TestMute
from tests.factories import ProjectFactory
from tests.security.hostile_values import CONTROL_CHARS, nested

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


# --- 1. what a stored name may hold, and one way to link it ------------------------------------------

XPU_NEWLINE = {
    "classname": "test.test_ops.TestCommonXPU",
    "name": "test_addmm_xpu_float32\nx",
    "file": "test/test_ops.py",
    "message": "RuntimeError: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
}
PAGES = ["/crcr", "/crcr/intel/torch-xpu-ops", "/api/v1/level-status"]


@pytest.fixture
def trunk_with_a_newline(settings):
    """The reference green and Intel XPU failing a test whose name holds a newline, on trunk."""
    from tests.triage.conftest import make_trunk, result

    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "n"}}
    ref = ProjectFactory(full_name="pytorch/openreg-ci", level="L2", is_reference=True, hardware_kind="reference")
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4", hardware_kind="gpu")
    trunk = make_trunk(3)
    result(ref, trunk[0].sha)
    result(xpu, trunk[0].sha, [XPU_NEWLINE])
    return xpu, trunk


def maintainer_of(project) -> APIClient:
    from api.models import BackendMaintainer

    user = get_user_model().objects.create_user("dana")
    BackendMaintainer.objects.create(user=user, project=project, granted_by="root")
    return token_client(user, ["read", backend_scope(project.full_name)])


def test_a_muted_test_whose_name_holds_a_newline_takes_no_page_down(client, trunk_with_a_newline):
    from relay.policy import links
    from relay.policy.testids import report_ids

    xpu, trunk = trunk_with_a_newline
    (shown,) = report_ids([XPU_NEWLINE], xpu.device_type)
    muted = maintainer_of(xpu).post("/api/v1/mutes", mute_body(test_id=shown.full), format="json")
    assert muted.status_code == 201, muted.content
    assert {url: client.get(url).status_code for url in PAGES} == dict.fromkeys(PAGES, 200)
    assert shown.full == "test_ops.TestCommon.test_addmm_float32\\nx"
    assert client.get(f"/commit/{trunk[0].sha}").status_code == 200
    assert client.get(links.test_path(shown.full)).status_code < 500


@pytest.mark.parametrize("char", CONTROL_CHARS, ids=[f"U+{ord(c):04X}" for c in CONTROL_CHARS])
def test_every_identity_is_built_without_control_characters_and_links_to_its_page(char):
    from urllib.parse import unquote

    from django.urls import resolve

    from relay.inputs.text import holds_controls
    from relay.policy import links
    from relay.policy.testids import parse_test_id, report_ids, test_id

    name = f"test_add{char}x_xpu_float32"
    ids = [
        test_id(name, f"test.test_ops.Test{char}CommonXPU", f"test/test_ops{char}.py", ("xpu",)),
        *report_ids([{"name": name, "classname": "TestCommonXPU", "file": "test/test_ops.py"}], "xpu"),
        parse_test_id(f"test_ops.TestCommon.{name}"),
    ]
    for tid in ids:
        assert not holds_controls(tid.full), tid
        assert char.encode("unicode_escape").decode() in tid.full
        assert resolve(unquote(links.test_path(tid.full))).kwargs == {"identity": tid.full}


@pytest.mark.parametrize("char", CONTROL_CHARS, ids=[f"U+{ord(c):04X}" for c in CONTROL_CHARS])
def test_the_mutes_api_refuses_a_test_id_holding_a_control_character_with_a_400(xpu, char):
    response = superuser_client().post("/api/v1/mutes", mute_body(test_id=ADDMM + char + "x"), format="json")
    assert response.status_code == 400 and "control or invisible character" in response.content.decode()
    assert not TestMute.objects.exists()


def test_a_name_stored_before_the_rule_takes_no_page_down(client, trunk_with_a_newline):
    from django.utils import timezone

    from relay.models import TestIdentity
    from relay.policy import links

    xpu, trunk = trunk_with_a_newline
    raw = "test_ops.TestCommon.test_addmm_float32\nx"
    identity = TestIdentity.objects.get(pk=TestIdentity.objects.ids_for({_as_stored(raw)})[_as_stored(raw)])
    TestMute.objects.create(
        identity=identity,
        project=xpu,
        reason="r",
        owner="o",
        created_by="root",
        expires_at=timezone.now() + timezone.timedelta(days=2),
    )
    assert "\n" in identity.identity
    assert {url: client.get(url).status_code for url in PAGES} == dict.fromkeys(PAGES, 200)
    for url in (links.test_path(raw), "/api/v1/tests/" + links.test_path(raw)[len("/test/") :] + "/history"):
        assert client.get(url).status_code in (200, 404), url  # found by its route, never a 500


def _as_stored(text: str):
    """A TestId holding `text` as it is, newline and all: what the store wrote before the rule."""
    from relay.policy.testids import TestId

    module, _, key = text.partition(".")
    return TestId(module, key.replace("\\n", "\n"))


def test_links_to_a_test_are_built_one_way():
    """Only relay.policy.links.test_path builds a test's address (quoted, it never raises): reverse()
    raised on a newline and answered 500 for three pages."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    offenders = [
        str(path.relative_to(root))
        for package in ("relay", "hud", "api")
        for path in (root / package).rglob("*")
        if path.suffix in (".py", ".html")
        and any(name in path.read_text() for name in ('"hud-test"', "'hud-test'", '"api-test-history"'))
        and path.name != "urls.py"
    ]
    assert offenders == []


# --- 3. who maintains which backend: decided by someone allowed, checked on every request ------------


def staff_client(username: str, *codenames: str):
    from django.contrib.auth.models import Permission
    from django.test import Client

    user = get_user_model().objects.create_user(username, password="pw-" + "x" * 20, is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return user, client


def test_a_staff_member_who_may_add_tokens_cannot_grant_themselves_a_backend(xpu):
    clerk, client = staff_client("clerk", "add_apitoken", "view_apitoken")
    form = {"user": str(clerk.pk), "name": "mine", "scopes": ["read"], "backends": [str(xpu.pk)]}
    answer = client.post("/admin/api/apitoken/add/", form)
    assert answer.status_code == 200 and not ApiToken.objects.exists()
    assert client.post("/admin/api/backendmaintainer/add/", {"user": clerk.pk, "project": xpu.pk}).status_code == 403
    # a token that carries the scope anyway (minted before this rule) mutes nothing
    muting = token_client(clerk, ["read", backend_scope(xpu.full_name)])
    assert muting.post("/api/v1/mutes", mute_body(), format="json").status_code == 403
    assert not TestMute.objects.exists()


def test_a_superuser_or_the_permission_given_for_it_makes_a_maintainer_and_the_token_follows(xpu, admin_client):
    from api.models import BackendMaintainer

    dana, _ = staff_client("dana")
    assert (
        admin_client.post("/admin/api/backendmaintainer/add/", {"user": dana.pk, "project": xpu.pk}).status_code == 302
    )
    granted = BackendMaintainer.objects.get(user=dana)
    assert (granted.project, granted.granted_by) == (xpu, "admin")
    muting = token_client(dana, ["read", backend_scope(xpu.full_name)])
    created = muting.post("/api/v1/mutes", mute_body(), format="json")
    assert created.status_code == 201
    granted.delete()  # checked on every request: the next one is refused
    assert muting.post(f"/api/v1/mutes/{created.json()['id']}/lift", {}, format="json").status_code == 403
    lead, lead_client = staff_client("lead", "add_backendmaintainer", "view_backendmaintainer")
    assert (
        lead_client.post("/admin/api/backendmaintainer/add/", {"user": dana.pk, "project": xpu.pk}).status_code == 302
    )
    assert muting.post(f"/api/v1/mutes/{created.json()['id']}/lift", {}, format="json").status_code == 200


def test_a_maintainer_of_one_backend_grants_a_token_only_that_backend(xpu):
    from api.models import BackendMaintainer

    rocm = ProjectFactory(full_name="ROCm/pytorch", level="L3")
    dana, client = staff_client("dana", "add_apitoken", "view_apitoken")
    BackendMaintainer.objects.create(user=dana, project=xpu, granted_by="root")
    form = {"user": str(dana.pk), "name": "t", "scopes": ["read"], "backends": [str(rocm.pk)]}
    assert client.post("/admin/api/apitoken/add/", form).status_code == 200 and not ApiToken.objects.exists()
    form["backends"] = [str(xpu.pk)]
    assert client.post("/admin/api/apitoken/add/", form).status_code == 200
    assert ApiToken.objects.get(user=dana).scopes == ["backend:intel/torch-xpu-ops", "read"]


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


def test_a_key_server_answering_json_nested_past_the_limit_is_unavailable_not_a_crash():
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from relay.callbacks import oidc

    class Deep(BaseHTTPRequestHandler):
        timeout = 5

        def do_GET(self):
            body = nested(5000)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Deep)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        with pytest.raises(oidc.KeyServerUnavailable, match="nested deeper"):
            oidc.fetch_json(f"http://127.0.0.1:{server.server_address[1]}/jwks")
    finally:
        server.shutdown()
        server.server_close()


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


# --- also: what one commit page renders is capped and paged ------------------------------------------


@pytest.fixture
def thousand_long_failures():
    """The review's commit: 1,000 failed tests of 1,000-character names on one backend, the
    reference green."""
    from relay.models import FailedTest
    from tests.factories import JobRunFactory, UpstreamCommitFactory

    sha = "d" * 40
    UpstreamCommitFactory(sha=sha, title="Big (#7)")
    ref = ProjectFactory(full_name="pytorch/openreg-ci", level="L2", is_reference=True)
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    JobRunFactory(project=ref, head_sha=sha, conclusion="success", tests_total=5000)
    job = JobRunFactory(project=xpu, head_sha=sha, conclusion="failure", tests_total=5000, tests_failed=1000)
    FailedTest.objects.bulk_create(
        FailedTest(
            job_run=job,
            classname=f"test.test_ops.TestCommon{i % 7}XPU",
            name=f"test_n{i:04d}_" + "x" * 977 + "_xpu_float32",  # 1,000 characters, the callback's cap
            file="test/test_ops.py",
            message="AssertionError: Tensor-likes are not close!",
        )
        for i in range(1000)
    )
    return sha, xpu


def test_links(body: str) -> set[str]:
    import re

    return set(re.findall(r'<a class="test-link" href="([^"]+)"', body))


test_links.__test__ = False


def test_a_commit_with_a_thousand_long_failed_tests_renders_a_page_at_a_time(client, thousand_long_failures):
    sha, xpu = thousand_long_failures
    first = client.get(f"/commit/{sha}", {"open": "all"})
    body = first.content.decode()
    assert first.status_code == 200 and len(first.content) < 1_000_000, len(first.content)
    assert 50 <= len(test_links(body)) <= 100 and body.count('<a class="test-link"') <= 100
    assert "Tests 1–50 of 1000" in body
    assert "?open=all&amp;tests=2" in body  # the next page keeps the rest of the URL
    second = client.get(f"/commit/{sha}", {"open": "all", "tests": "2"}).content.decode()
    assert "Tests 51–100 of 1000" in second and "?open=all" in second
    seen = set()  # every test is on some page: paging loses none
    for number in range(1, 21):
        shown = client.get(f"/commit/{sha}", {"tests": str(number)}).content.decode()
        seen |= test_links(shown)
    assert len(seen) == 1000
    assert "Tests 951–1000 of 1000" in shown and "tests=21" not in shown
    beyond = client.get(f"/commit/{sha}", {"tests": "21"})
    assert beyond.status_code == 200 and "No tests past the 1000 listed" in beyond.content.decode()


@pytest.mark.parametrize("value", ["٢", "２", "²", "0", "-1", "1e3", "99999999999999999999"])
def test_a_tests_page_not_in_ascii_digits_is_the_first_page(client, thousand_long_failures, value):
    sha, _ = thousand_long_failures
    body = client.get(f"/commit/{sha}", {"tests": value}).content.decode()
    assert "Tests 1–50 of 1000" in body
