"""The fourth outside review's findings (issue 45), each at its source: stored values that made
pages answer 500, JSON text that skipped the body's checks, nesting the save could not encode, a
backtracking pattern in the log reader, an adjusted pass rate that trusted what it should check,
a demotion PR that rewrote the whole allowlist, a YAML alias bomb, and the smaller ones (machine
answers without CSP, invisible characters upstream, non-ASCII digits read as numbers, a token's
jti no database stores, DNS rebinding of notification webhooks). The sweeps that look for the
next value of each class are test_hostile_sweep.py and tests/reliability/test_hostile_input.py."""

import json
import unicodedata

import pytest
from django.utils import timezone

from relay.models import JobRun
from tests.factories import JobRunFactory, ProjectFactory, UpstreamCommitFactory
from tests.security.hostile_values import INVISIBLE, nested

pytestmark = pytest.mark.django_db
SHA = "a" * 40
VERDICT = {"schema_version": 1, "category": "upstream", "confidence": "high", "summary": "upstream broke it"}
VERDICT_TEXT = json.dumps(VERDICT)


def callback(client, oidc, *, token=None, raw=None, **workflow):
    """A verified L2 callback for a sent dispatch on SHA, with `workflow` fields changed (or the
    body's bytes rewritten by `raw`)."""
    from relay.dispatch.sending import dispatch_client_payload
    from tests.conftest import action_body
    from tests.factories import DeliveryFactory, DispatchFactory

    project = ProjectFactory(full_name="sec-org/backend", github_repo_id=9100, level="L2")
    delivery = DeliveryFactory(head_sha=SHA)
    dispatch = DispatchFactory(project=project, delivery=delivery, head_sha=SHA, state="sent", sent_at=timezone.now())
    body = json.dumps(action_body(dispatch_client_payload(dispatch), "completed", "failure", **workflow)).encode()
    token = token or oidc.mint(repository=project.full_name, repository_id="9100")
    return client.post(
        "/github/callback",
        data=raw(body) if callable(raw) else body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def pages_answer(client) -> dict[str, int]:
    """The pages and reads a stored verdict or failed test reaches, by their status codes."""
    UpstreamCommitFactory(sha=SHA, title="Fix (#1)")
    urls = ["/", f"/commit/{SHA}", "/api/v1/jobs/", "/crcr/sec-org/backend"]
    return {url: client.get(url).status_code for url in urls}


# --- 1. stored values that made pages answer 500 --------------------------------------------------------


@pytest.mark.parametrize("stamp", ["9999-12-31T23:00:00-05:00", "0001-01-01T00:30:00+01:00", "2026-02-30T00:00Z"])
def test_a_verdict_whose_analyzed_at_leaves_the_calendar_in_utc_is_dropped_and_pages_stay_up(client, oidc, stamp):
    response = callback(client, oidc, triage_verdict={**VERDICT, "analyzed_at": stamp})
    assert response.status_code == 200
    assert JobRun.objects.get().triage_verdict is None
    assert set(pages_answer(client).values()) == {200}


def test_a_verdict_stored_before_with_an_out_of_calendar_date_no_longer_breaks_a_page(client):
    project = ProjectFactory(full_name="sec-org/backend", level="L2")
    stored = {**VERDICT, "analyzed_at": "9999-12-31T23:00:00-05:00", "evidence": [], "analyzer": {}}
    JobRunFactory(project=project, head_sha=SHA, conclusion="failure", triage_verdict=stored)
    assert set(pages_answer(client).values()) == {200}


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(
            '{"schema_version": 1, "category": "upstream", "confidence": "high", "summary": "\\ud800"}',
            id="lone surrogate",
        ),
        pytest.param(
            '{"schema_version": 1, "category": "upstream", "confidence": "high", "summary": "a\\u0000"}', id="NUL"
        ),
        pytest.param(VERDICT_TEXT[:-1] + ', "x": ' + "[" * 5000 + "]" * 5000 + "}", id="5000 levels deep"),
        pytest.param(VERDICT_TEXT[:-1] + ', "x": ' + "[" * 62 + "]" * 62 + "}", id="one past the depth limit"),
        pytest.param(VERDICT_TEXT[:-1] + ', "x": 1e999}', id="a number no double holds"),
    ],
)
def test_a_verdict_sent_as_json_text_passes_the_bodys_checks_or_is_dropped(client, oidc, text):
    """The verdict is advice: one that fails a check is dropped, and the callback is recorded."""
    response = callback(client, oidc, triage_verdict=text)
    assert response.status_code == 200, response.content
    assert JobRun.objects.get().triage_verdict is None
    assert set(pages_answer(client).values()) == {200}


@pytest.mark.parametrize(
    "text, needle",
    [
        ('[{"name": "test_x\\ud800"}]', "lone surrogate"),
        ('[{"name": "test_x\\u0000"}]', "NUL"),
        ("[" * 5000 + "]" * 5000, "nested deeper"),
        ('[{"name": "t", "x": ' + "[" * 61 + "]" * 61 + "}]", "nested deeper"),
        ('[{"name": "t", "x": NaN}]', "NaN"),
    ],
)
def test_failed_tests_sent_as_json_text_pass_the_bodys_checks(client, oidc, text, needle):
    response = callback(client, oidc, failed_tests=text)
    assert response.status_code == 400 and needle in response.json()["detail"], response.content
    assert "'workflow.failed_tests'" in response.json()["detail"]
    assert not JobRun.objects.exists()


def test_test_results_sent_as_json_text_pass_the_bodys_checks(client, oidc):
    response = callback(client, oidc, test_results="[" * 5000 + "]" * 5000)
    assert response.status_code == 400 and "'workflow.test_results'" in response.json()["detail"]


def test_json_text_within_the_limits_reads_as_the_object_would(client, oidc):
    failed = json.dumps([{"name": "test_add", "classname": "TestOps", "message": "boom"}])
    verdict = json.dumps({**VERDICT, "schema_version": "1", "analyzed_at": "2026-12-02T10:00:00-05:00"})
    response = callback(client, oidc, failed_tests=failed, triage_verdict=verdict, test_results='{"failed": 1}')
    assert response.status_code == 200, response.content
    job = JobRun.objects.get()
    assert job.triage_verdict["analyzed_at"] == "2026-12-02T15:00:00+00:00"
    assert [t.name for t in job.failed_tests.all()] == ["test_add"] and job.tests_failed == 1


@pytest.mark.parametrize("version", ["¹", "١", "𝟏", "1_0", " 1", "+1", "1.0", 1.0, True])
def test_a_schema_version_that_is_not_ascii_digits_drops_the_verdict_never_a_500(client, oidc, version):
    response = callback(client, oidc, triage_verdict={**VERDICT, "schema_version": version})
    assert response.status_code == 200
    assert JobRun.objects.get().triage_verdict is None


# --- 2. nesting the save cannot encode again ------------------------------------------------------------


@pytest.mark.parametrize("depth", [65, 1000, 1024, 1025, 100_000])
def test_a_callback_nested_past_the_limit_is_a_400_before_anything_is_stored(client, oidc, depth):
    def deep(body: bytes) -> bytes:
        return body.replace(b'"workflow": {', b'"workflow": {"extra": ' + nested(depth - 2) + b", ", 1)

    response = callback(client, oidc, raw=deep)
    assert response.status_code == 400 and "nested deeper than 64 levels" in response.json()["detail"]
    assert not JobRun.objects.exists()


def test_a_callback_nested_exactly_to_the_limit_is_stored(client, oidc):
    def deep(body: bytes) -> bytes:
        return body.replace(b'"workflow": {', b'"workflow": {"extra": ' + nested(62) + b", ", 1)

    assert callback(client, oidc, raw=deep).status_code == 200
    assert JobRun.objects.count() == 1


@pytest.mark.parametrize("depth", [65, 1000, 1024, 100_000])
def test_a_signed_webhook_nested_past_the_limit_is_a_400(post_webhook, depth):
    from relay.models import Delivery
    from tests.conftest import fixture_payload

    body = json.dumps(fixture_payload("pull_request.opened")).encode()
    body = body.replace(b'"number": 2,', b'"number": 2, "odd": ' + nested(depth - 1) + b",", 1)
    response = post_webhook("pull_request", body)
    assert response.status_code == 400 and "nested deeper than 64 levels" in response.json()["detail"]
    assert not Delivery.objects.exists()


def test_one_depth_limit_sits_below_every_encoder_the_value_meets():
    import sys

    from relay.inputs import jsonin

    value = jsonin.loads(nested(jsonin.MAX_DEPTH))
    json.loads(json.dumps(value))  # what the save and a later read do, far from the recursion limit
    assert sys.getrecursionlimit() > jsonin.MAX_DEPTH * 4 and jsonin.MAX_DEPTH < 1024  # orjson's
    with pytest.raises(jsonin.NotStorable):
        jsonin.loads(nested(jsonin.MAX_DEPTH + 1))


# --- 7. a signed token whose claims no database stores ---------------------------------------------------


@pytest.mark.parametrize(
    "claims",
    [
        {"jti": "\ud800"},
        {"jti": "jti-\x00"},
        {"jti": "j" * 10 + "\udfff" + "j"},
        {"repository": "sec-org/backend\x00"},
        {"sub": "repo:sec-org/backend:\ud800"},
    ],
)
def test_a_signed_token_whose_claims_hold_a_nul_or_a_lone_surrogate_is_a_401(client, oidc, claims):
    token = oidc.mint(**{"repository": "sec-org/backend", "repository_id": "9100", **claims})
    response = callback(client, oidc, token=token)
    assert response.status_code == 401 and "malformed token" in response.json()["detail"]
    assert not JobRun.objects.exists()


# --- 7. non-ASCII digits never read as numbers -------------------------------------------------------------

NOT_ASCII = {
    "Nd (Arabic-Indic)": "٠١٢٣٤٥٦٧٨٩",
    "Nd (mathematical bold)": "𝟎𝟏𝟐𝟑𝟒𝟓𝟔𝟕𝟖𝟗",
    "Nd (fullwidth)": "０１２３４５６７８９",
}
NOT_ASCII["No (superscript)"] = "⁰¹²³⁴⁵⁶⁷⁸⁹"


def spelled(number, digits: str) -> str:
    """`number` written with another script's digits."""
    return "".join(digits[int(d)] for d in str(number))


@pytest.mark.parametrize("digits", NOT_ASCII.values(), ids=NOT_ASCII.keys())
def test_a_job_id_in_other_digits_names_no_job(client, digits):
    job = JobRunFactory(project=ProjectFactory(level="L2"), head_sha=SHA)
    assert client.get(f"/api/v1/jobs/{job.id}/").status_code == 200
    assert client.get(f"/api/v1/jobs/{spelled(job.id, digits)}/").status_code == 404
    assert client.get(f"/api/v1/jobs/{spelled(job.id, digits)}/failed-tests/").status_code == 404


def test_a_dispatch_id_in_other_digits_names_no_dispatch(client, django_user_model):
    from tests.factories import DispatchFactory

    dispatch = DispatchFactory()
    client.force_login(django_user_model.objects.create_user("op", is_staff=True))
    assert client.get(f"/api/v1/dispatches/{dispatch.id}/").status_code == 200
    assert client.get(f"/api/v1/dispatches/{spelled(dispatch.id, NOT_ASCII['Nd (Arabic-Indic)'])}/").status_code == 404


@pytest.mark.parametrize("digits", NOT_ASCII.values(), ids=NOT_ASCII.keys())
def test_list_filters_refuse_numbers_and_times_in_other_digits(client, digits):
    project = ProjectFactory(level="L2")
    JobRunFactory(project=project, head_sha=SHA, pr_number=12)
    assert len(client.get("/api/v1/jobs/?pr=12").json()["results"]) == 1
    assert client.get(f"/api/v1/jobs/?pr={spelled(12, digits)}").status_code == 400
    assert client.get(f"/api/v1/deliveries/?pr={spelled(12, digits)}").status_code in (400, 401, 403)
    since = f"{spelled(2026, digits)}-01-01T00:00:00Z"
    assert client.get("/api/v1/jobs/", {"since": since}).status_code == 400
    assert client.get("/api/v1/jobs/", {"until": "2026-01-01T00:00:00+0" + digits[5] + ":00"}).status_code == 400


@pytest.mark.parametrize("digits", NOT_ASCII.values(), ids=NOT_ASCII.keys())
def test_a_page_size_in_other_digits_is_no_page_size(client, digits):
    project = ProjectFactory(level="L2")
    for _ in range(3):
        JobRunFactory(project=project, head_sha=SHA)
    assert len(client.get("/api/v1/jobs/?page_size=2").json()["results"]) == 2
    assert len(client.get(f"/api/v1/jobs/?page_size={spelled(2, digits)}").json()["results"]) == 3


@pytest.mark.parametrize("value", ["١٢٣", "𝟏𝟐𝟑", "¹²³", "1_23", " 123", "+123", 123.0, 123.5, True])
def test_an_api_write_refuses_an_id_in_anything_but_ascii_digits_or_a_json_integer(value):
    from api.serializers import ProjectIn, ProjectPatchIn

    base = {"full_name": "sec-org/new", "level": "L1"}
    assert ProjectIn(data={**base, "github_repo_id": "123"}).is_valid()
    assert ProjectIn(data={**base, "github_repo_id": 123}).is_valid()
    assert not ProjectIn(data={**base, "github_repo_id": value}).is_valid()
    assert not ProjectPatchIn(data={"rate_limit_per_min": value}).is_valid()


@pytest.mark.parametrize("attempt", ["1_0", "١", "𝟐", "²", " 2", "+2", "0x2", 2.9, 2.0, True, [2], "2.0", "1e1"])
def test_a_run_attempt_that_is_not_an_integer_or_its_ascii_digits_is_a_400(client, oidc, attempt):
    response = callback(
        client, oidc, raw=lambda b: b.replace(b'"run_attempt": "1"', f'"run_attempt": {json.dumps(attempt)}'.encode())
    )
    assert response.status_code == 400 and "'workflow.run_attempt'" in response.json()["detail"], attempt
    assert not JobRun.objects.exists()


@pytest.mark.parametrize("attempt", ["2", 2, "0002"])
def test_a_run_attempt_as_an_integer_or_its_ascii_digits_is_read(client, oidc, attempt):
    response = callback(
        client, oidc, raw=lambda b: b.replace(b'"run_attempt": "1"', f'"run_attempt": {json.dumps(attempt)}'.encode())
    )
    assert response.status_code == 200 and JobRun.objects.get().run_attempt == 2


@pytest.mark.parametrize("digits", NOT_ASCII.values(), ids=NOT_ASCII.keys())
def test_a_callback_timestamp_in_other_digits_is_a_400_naming_the_field(client, oidc, digits):
    stamp = f"{spelled(2026, digits)}-12-02T10:00:00Z"
    response = callback(client, oidc, completed_at=stamp)
    assert response.status_code == 400 and "'workflow.completed_at'" in response.json()["detail"]


# --- 6. a YAML alias bomb ------------------------------------------------------------------------------------

LAUGHS = """a: &a [xxxxxxxx,xxxxxxxx,xxxxxxxx,xxxxxxxx,xxxxxxxx,xxxxxxxx,xxxxxxxx,xxxxxxxx,xxxxxxxx]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
L2:
  - o/r:
      events: {where}
"""


@pytest.mark.parametrize("where", ["[*d,*d,*d,*d,*d,*d,*d,*d,*d]", "*e", "[*e]"])
def test_an_alias_bomb_is_refused_within_a_small_budget_with_a_short_message(where):
    from relay.registry.allowlist import MAX_ALIAS_NODES, AllowlistError, parse_allowlist

    with pytest.raises(AllowlistError) as refused:
        parse_allowlist(LAUGHS.format(where=where))
    assert len(str(refused.value)) < 1000 and f"more than {MAX_ALIAS_NODES:,}" in str(refused.value)


def test_a_self_referencing_alias_is_refused():
    from relay.registry.allowlist import AllowlistError, parse_allowlist

    with pytest.raises(AllowlistError, match="alias"):
        parse_allowlist("L1: &a [*a]")


def test_anchors_within_the_budget_are_read_as_upstream_writes_them():
    from relay.registry.allowlist import parse_allowlist

    text = "L2:\n  - a/one: &team [x-ci, y-ci]\n  - a/two:\n      oncalls: *team\n  - a/three: *team\n"
    assert [e.oncalls for e in parse_allowlist(text)] == [("x-ci", "y-ci")] * 3


@pytest.mark.parametrize(
    "text",
    [
        "L2:\n  - o/r: [" + ", ".join(["'" + "h" * 5000 + "'"] * 3) + "]",
        "L2:\n  - o/r:\n      events: ['" + "e" * 100_000 + "']",
        "L2:\n" + "".join(f"  - bad name {i}\n" for i in range(5000)),
        "L1:\n  " + "k" * 100_000 + ": 1\n  " + "k" * 100_000 + ": 2\n",
        "L3:\n  xpu:\n    o/r: " + "[" * 200 + "]" * 200,
    ],
)
def test_every_allowlist_error_text_is_capped(text):
    from relay.registry.allowlist import MAX_ERRORS, AllowlistError, parse_allowlist

    with pytest.raises(AllowlistError) as refused:
        parse_allowlist(text)
    assert len(refused.value.errors) <= MAX_ERRORS + 1 and all(len(e) <= 300 for e in refused.value.errors)
    assert len(str(refused.value)) < 20_000


# --- 7. invisible characters in what we write upstream ------------------------------------------------------

VISIBLE_FORMAT = set("\u0600\u0601\u0602\u0603\u0604\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd")
"""Format characters that are drawn (Arabic number signs and the like): shown as they are."""


@pytest.mark.parametrize("char", INVISIBLE, ids=lambda c: unicodedata.name(c, f"U+{ord(c):04X}"))
def test_an_invisible_character_never_reaches_a_check_run_name_a_code_span_or_a_body(char):
    from relay.checks.checkruns import job_check_run_name
    from relay.github.markdown import md_code, upstream_body

    project = ProjectFactory(full_name="intel/torch-xpu-ops")
    assert job_check_run_name(project, f"ci{char}", f"test{char}add") == "crcr/intel/torch-xpu-ops/ci /test add"
    assert md_code(f"test{char}add") == "`test add`"
    body = upstream_body({"name": f"a{char}b", "output": {"summary": f"line{char}\nnext"}})
    assert body == {"name": "a b", "output": {"summary": "line\nnext"}}


@pytest.mark.parametrize("char", INVISIBLE, ids=lambda c: unicodedata.name(c, f"U+{ord(c):04X}"))
def test_pages_show_an_invisible_character_as_its_code_point(client, char):
    project = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4", display_name="XPU")
    JobRunFactory(project=project, head_sha=SHA, conclusion="failure", job_name=f"build{char}x")
    UpstreamCommitFactory(sha=SHA, title=f"Fix{char} (#1)")
    html = client.get(f"/commit/{SHA}").content.decode()
    assert char not in html and f"⟨U+{ord(char):04X}⟩" in html


def test_every_invisible_format_character_unicode_knows_is_in_the_one_class():
    import re
    import sys

    from relay.inputs.text import CONTROLS

    every = re.compile(f"[{CONTROLS}]")
    formats = (chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf")
    assert [f"U+{ord(c):04X}" for c in formats if c not in VISIBLE_FORMAT and not every.search(c)] == []
    assert all(every.search(c) for c in INVISIBLE)
    assert not any(every.search(c) for c in VISIBLE_FORMAT | set("aZ9 é中🙂\ufe0f"))


# --- 7. notification webhooks connect to the address they checked ----------------------------------------

PUBLIC, INTERNAL = "93.184.216.34", "127.0.0.1"


@pytest.fixture
def rebinding_dns(monkeypatch):
    """A name whose first answer is public and every later one internal (DNS rebinding)."""
    import socket

    real, asked = socket.getaddrinfo, []

    def getaddrinfo(host, port, *args, **kwargs):
        if host != "hooks.rebind.example":
            return real(host, port, *args, **kwargs)
        asked.append(host)
        address = PUBLIC if len(asked) == 1 else INTERNAL
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port or 443))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


def test_a_webhook_connects_only_to_the_address_it_checked(rebinding_dns, settings, monkeypatch):
    import socket

    from relay.notify import channels

    settings.CRCR_NOTIFY_ALLOW_PRIVATE = False
    connected = []

    def create_connection(address, *args, **kwargs):
        connected.append(address[0])
        raise ConnectionRefusedError("refused by the test")

    monkeypatch.setattr(socket, "create_connection", create_connection)
    with pytest.raises(channels.SendError):
        channels.webhook_post("https://hooks.rebind.example/T0/B1", {"text": "x"}, {})
    assert connected == [PUBLIC] and rebinding_dns == ["hooks.rebind.example"]


def test_the_pinned_request_keeps_its_name_in_the_host_header_and_the_tls_server_name(settings, monkeypatch):
    import httpx

    from relay.notify import channels

    settings.CRCR_NOTIFY_ALLOW_PRIVATE = False
    monkeypatch.setattr(channels, "_resolved", lambda host, port: [PUBLIC])
    seen = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), request.headers["Host"], request.extensions.get("sni_hostname")))
        return httpx.Response(204)

    monkeypatch.setattr(channels, "session", lambda: httpx.Client(transport=httpx.MockTransport(answer)))
    assert channels.webhook_post("https://hooks.example.com:8443/T0/B1?x=1", {"text": "x"}, {}) == 204
    assert channels.webhook_post("http://hooks.example.com/T0", {"text": "x"}, {}) == 204
    assert seen == [
        (f"https://{PUBLIC}:8443/T0/B1?x=1", "hooks.example.com:8443", "hooks.example.com"),
        (f"http://{PUBLIC}/T0", "hooks.example.com", None),
    ]


def test_a_name_with_one_internal_address_among_public_ones_is_refused(settings, monkeypatch):
    from relay.notify import channels

    settings.CRCR_NOTIFY_ALLOW_PRIVATE = False
    monkeypatch.setattr(channels, "_resolved", lambda host, port: [PUBLIC, "10.0.0.7"])
    with pytest.raises(channels.SendError, match="private or loopback") as refused:
        channels.webhook_post("https://hooks.example.com/x", {}, {})
    assert refused.value.permanent


def test_a_pinned_webhook_reaches_a_real_sink_by_its_name(settings, monkeypatch):
    """End to end over HTTP: the name resolves (once) to the local sink, which hears its name."""
    import socket
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from relay.notify import channels

    heard = []

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self):
            heard.append((self.headers["Host"], json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    settings.CRCR_NOTIFY_ALLOW_PRIVATE = True  # the sink is local
    real = socket.getaddrinfo
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, *a, **k: real("127.0.0.1" if host == "hooks.sink.test" else host, *a, **k),
    )
    try:
        assert channels.webhook_post(f"http://hooks.sink.test:{port}/hook", {"text": "hi"}, {}) == 204
    finally:
        server.shutdown()
        server.server_close()
    assert heard == [(f"hooks.sink.test:{port}", {"text": "hi"})]
