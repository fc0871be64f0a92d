"""Hostile input: schemathesis over the read API (via WSGI), and property-based tests (hypothesis)
on the webhook, callback and allowlist parsers — they either return their result or raise their
documented error (`WebhookRejected`, `BadCallback`, `AllowlistError`), never anything else — plus
the callback endpoint itself, which answers hostile bodies with a 4xx, never a 500."""

import itertools
import json
import string

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from schemathesis import checks

from relay.callbacks.body import BadCallback, Report, body_parse, report_read
from relay.intake.webhooks import WebhookRejected, WebhookRequest, signature_expected, webhook_read
from relay.registry.allowlist import AllowlistError, Entry, parse_allowlist
from tests.security.hostile_values import (
    FEW_DIGITS,
    INVISIBLE,
    JSON_TEXTS,
    OUT_OF_CALENDAR,
    nested,
    spelled,
)

from .conftest import callback_body

pytestmark = [pytest.mark.fuzz, pytest.mark.timeout(180)]
SECRET = "hostile-input-webhook-secret"
BOUNDED = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)


# --- building blocks ------------------------------------------------------------------------------

HOSTILE_TEXT = st.sampled_from(
    ["\x00", "\ud800", "\udfff", "\u202e", "<script>", "'; DROP TABLE relay_jobrun; --", "\n", " ", "9" * 400]
    + INVISIBLE
    + [spelled(12, d) for d in FEW_DIGITS]
)
text = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.characters(), max_size=8).flatmap(lambda t: HOSTILE_TEXT.map(lambda h: t + h)),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    text,
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=15,
)
timestamps = st.one_of(
    st.sampled_from(OUT_OF_CALENDAR),
    st.builds(
        lambda y, sign, h, m: f"{y:04d}-12-31T23:30:00{sign}{h:02d}:{m:02d}",
        st.sampled_from([1, 9999]),
        st.sampled_from("+-"),
        st.integers(0, 23),
        st.integers(0, 59),
    ),
    st.sampled_from(FEW_DIGITS).map(lambda d: f"{spelled(2026, d)}-12-02T10:00:00Z"),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.builds(
        lambda y, mo, d, h, mi: f"{y:04d}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:00+00:00",
        st.integers(0, 9999),
        st.integers(0, 19),
        st.integers(0, 40),
        st.integers(0, 30),
        st.integers(0, 70),
    ),
    json_values,
)
urls = st.one_of(
    st.sampled_from(
        [
            "https://ci.example.org/run/1",
            "javascript:alert(1)",
            "http://",
            "//evil",
            "ftp://x/y",
            "http://127.0.0.1:1/a",
        ]
    ),
    text,
    json_values,
)
counts = st.one_of(
    st.integers(min_value=-5, max_value=2**64), st.floats(allow_nan=True, allow_infinity=True), text, json_values
)
json_texts = st.one_of(st.sampled_from(list(JSON_TEXTS.values())), json_values.map(json.dumps))
"""Fields the action may send as a string holding JSON: hostile JSON text, or any value's."""
failed_test = st.one_of(
    st.fixed_dictionaries(
        {"name": text},
        optional={
            k: st.one_of(text, json_values) for k in ("classname", "file", "message", "stacktrace", "hw_classification")
        },
    ),
    json_values,
)
workflows = st.fixed_dictionaries(
    {"status": st.one_of(st.sampled_from(["in_progress", "completed"]), json_values)},
    optional={
        "name": st.one_of(text, json_values),
        "run_id": st.one_of(st.integers(), text, json_values),
        "run_attempt": st.one_of(
            st.integers(-3, 10**6), st.floats(allow_nan=True, allow_infinity=True), text, json_values
        ),
        "job_name": st.one_of(text, json_values),
        "conclusion": st.one_of(st.sampled_from(["success", "failure", "bogus", " success "]), json_values),
        "url": urls,
        "artifact_url": urls,
        "check_run_id": st.one_of(st.integers(), text, json_values),
        "started_at": timestamps,
        "completed_at": timestamps,
        "test_results": st.one_of(
            st.dictionaries(st.sampled_from(["passed", "failed", "skipped", "total"]), counts), text, json_values
        ),
        "failed_tests": st.one_of(st.lists(failed_test, max_size=4), json_values),
        "environment": st.one_of(
            st.dictionaries(
                st.one_of(st.text(max_size=70), st.just("x" * 65)), st.one_of(text, json_values), max_size=5
            ),
            json_values,
        ),
    },
)
VALID_WORKFLOW = {
    "status": "completed",
    "conclusion": "failure",
    "name": "ci",
    "run_id": "42",
    "run_attempt": "1",
    "job_name": "test",
    "url": "https://ci.example.org/runs/42",
    "artifact_url": "https://ci.example.org/runs/42/logs",
    "check_run_id": "7",
    "started_at": "2026-12-02T10:00:00Z",
    "completed_at": "2026-12-02T10:30:00+00:00",
    "test_results": {"passed": 10, "failed": 1, "skipped": 0},
    "failed_tests": [{"name": "test_x", "classname": "T", "message": "boom"}],
    "environment": {"device": "xpu", "driver": "1.0"},
    "triage_verdict": {
        "schema_version": 1,
        "category": "upstream",
        "confidence": "high",
        "summary": "upstream broke it",
        "analyzed_at": "2026-12-02T10:40:00Z",
    },
}
FIELD_PATHS = [(k,) for k in VALID_WORKFLOW] + [
    ("test_results", "passed"),
    ("test_results", "total"),
    ("failed_tests", 0),
    ("failed_tests", 0, "name"),
    ("failed_tests", 0, "message"),
    ("failed_tests", 0, "stacktrace"),
    ("failed_tests", 0, "classname"),
    ("failed_tests", 0, "hw_classification"),
    ("environment", "driver"),
    ("triage_verdict", "analyzed_at"),
    ("triage_verdict", "schema_version"),
    ("triage_verdict", "summary"),
]
hostile_values = st.one_of(text, scalars, timestamps, urls, counts, json_values, json_texts)


def patched(patches) -> dict:
    """The valid workflow with each (path, value) of `patches` written in."""
    workflow = json.loads(json.dumps(VALID_WORKFLOW))
    for path, value in patches:
        target = workflow
        try:
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
        except (TypeError, KeyError, IndexError):
            continue  # an earlier patch replaced the container: nothing to write into
    return workflow


patched_workflows = st.lists(st.tuples(st.sampled_from(FIELD_PATHS), hostile_values), min_size=1, max_size=3).map(
    patched
)
callback_bodies = st.one_of(
    patched_workflows.map(lambda w: {"delivery_id": "d", "event_type": "push", "workflow": w}),
    st.fixed_dictionaries(
        {"workflow": workflows},
        optional={
            "delivery_id": st.one_of(text, json_values),
            "event_type": st.one_of(st.sampled_from(["push", "pull_request", "nightly", "periodic"]), json_values),
            "payload": json_values,
            "callback_token": st.one_of(text, json_values),
        },
    ),
    json_values,
)

# --- the parsers ----------------------------------------------------------------------------------


@BOUNDED
@given(body=callback_bodies)
@example(body={"delivery_id": "d", "workflow": patched([(("failed_tests", 0, "message"), "\udfff")])})
@example(body={"delivery_id": "d", "workflow": patched([(("run_attempt",), float("inf"))])})
@example(body={"delivery_id": "d", "workflow": patched([(("started_at",), "2026-13-45T00:00:00Z")])})
def test_the_callback_parser_returns_a_report_or_raises_bad_callback(body):
    if not isinstance(body, dict):
        with pytest.raises(BadCallback):
            body_parse(json.dumps(body, allow_nan=True).encode())
        return
    try:
        assert isinstance(report_read(body), Report)
    except BadCallback:
        pass


@BOUNDED
@given(
    raw=st.one_of(
        st.binary(max_size=200), json_values.map(lambda v: json.dumps(v).encode()), st.text(max_size=50).map(str.encode)
    )
)
@example(raw=b"[" * 100_000)  # deeper than Python's recursion limit, well under the 2 MB cap
@example(raw=b'{"workflow": {"run_attempt": 1e400}}')
@example(raw=b'{"x": ' + nested(63) + b"}")  # at the depth limit
@example(raw=b'{"x": ' + nested(64) + b"}")  # one past it
@example(raw=b'{"x": ' + nested(1023) + b"}")  # what orjson still reads
def test_the_callback_body_decoder_returns_an_object_or_raises_bad_callback(raw):
    try:
        assert isinstance(body_parse(raw), dict)
    except BadCallback:
        pass


def webhook_headers(event, delivery, content_type, signature):
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "Content-Type": content_type}
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    return {k: v for k, v in headers.items() if v is not None}


@BOUNDED
@given(
    body=st.one_of(
        st.binary(max_size=300),
        json_values.map(lambda v: json.dumps(v).encode()),
        json_values.map(lambda v: b"payload=" + json.dumps(v).encode().replace(b"&", b"%26")),
    ),
    event=st.one_of(st.none(), st.sampled_from(["push", "pull_request", "ping", " ", ""]), st.text(max_size=20)),
    delivery=st.one_of(st.none(), st.text(max_size=120)),
    content_type=st.one_of(
        st.none(),
        st.sampled_from(
            [
                "application/json",
                "application/x-www-form-urlencoded",
                "APPLICATION/JSON; charset=utf-8",
                "text/plain",
                "",
            ]
        ),
        st.text(max_size=30),
    ),
    sign=st.sampled_from(["good", "bad", "missing", "sha1-only"]),
)
def test_the_webhook_reader_returns_a_request_or_raises_webhook_rejected(body, event, delivery, content_type, sign):
    signature = {
        "good": signature_expected(SECRET, body),
        "bad": "sha256=" + "0" * 64,
        "missing": None,
        "sha1-only": None,
    }[sign]
    headers = webhook_headers(event, delivery, content_type, signature)
    if sign == "sha1-only":
        headers["X-Hub-Signature"] = "sha1=" + "0" * 40
    try:
        hook = webhook_read(headers, body, SECRET)
    except WebhookRejected as exc:
        assert exc.status in (400, 401, 413, 415), exc.status
        assert sign == "good" or exc.status == 401
        return
    assert isinstance(hook, WebhookRequest) and isinstance(hook.payload, dict) and sign == "good"


def test_a_deeply_nested_signed_webhook_is_refused_not_crashed():
    body = b"[" * 100_000 + b"]" * 100_000
    headers = webhook_headers("push", "deep-1", "application/json", signature_expected(SECRET, body))
    with pytest.raises(WebhookRejected) as refused:
        webhook_read(headers, body, SECRET)
    assert refused.value.status == 400


handles = st.one_of(
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,10}", fullmatch=True), text, st.integers(), st.booleans(), st.none()
)
repo_names = st.one_of(
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,8}/[A-Za-z0-9._-]{1,12}", fullmatch=True), text, st.integers(), st.none()
)
oncalls = st.one_of(
    st.none(),
    handles,
    st.lists(handles, max_size=3),
    st.builds(", ".join, st.lists(st.text(string.ascii_letters, max_size=6), max_size=3)),
)
list_items = st.one_of(
    repo_names,
    st.dictionaries(
        repo_names.filter(lambda n: n is not None and not isinstance(n, bool)), oncalls, min_size=1, max_size=2
    ),
    json_values,
)
allowlist_docs = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "L1": st.one_of(st.lists(list_items, max_size=4), json_values),
            "L2": st.one_of(st.lists(list_items, max_size=4), json_values),
            "L4": st.one_of(st.lists(list_items, max_size=4), json_values),
            "L3": st.one_of(
                st.dictionaries(
                    st.one_of(st.from_regex(r"[a-z]{1,6}", fullmatch=True), text, st.integers()),
                    st.one_of(
                        st.dictionaries(repo_names.filter(lambda n: isinstance(n, str)), oncalls, max_size=3),
                        json_values,
                    ),
                    max_size=3,
                ),
                json_values,
            ),
        },
    ),
    json_values,
)


def yaml_text(doc) -> str:
    try:
        return yaml.safe_dump(doc, allow_unicode=True)
    except (yaml.YAMLError, UnicodeEncodeError):
        return str(doc)


@BOUNDED
@given(
    text_in=st.one_of(
        allowlist_docs.map(yaml_text),
        st.text(max_size=200),
        st.sampled_from(
            [
                "L1: [a/b, a/b]",
                "L3:\n  x:\n    a/b: [c]\n  X:\n    c/d: []",
                "L1: !!python/object:os.system x",
                "L2:\n - a/b\nL2:\n - c/d",
                "{[1]: 2}",
                "&a [*a]",
                "L1: *undefined",
                "\t- tab",
            ]
        ),
    )
)
@example(text_in="[" * 10_000)
def test_the_allowlist_parser_returns_entries_or_raises_allowlist_error(text_in):
    try:
        entries = parse_allowlist(text_in)
    except AllowlistError as exc:
        assert exc.errors and all(isinstance(e, str) and e for e in exc.errors)
        return
    assert all(isinstance(e, Entry) for e in entries)


# --- the callback endpoint, end to end ------------------------------------------------------------


@pytest.fixture
def callback_world(transactional_db, oidc):
    from relay.models import Delivery, Dispatch
    from tests.factories import ProjectFactory

    project = ProjectFactory(full_name="hostile/backend", github_repo_id=4242, level="L2", rate_limit_per_min=1_000_000)
    delivery = Delivery.objects.create(guid="hostile-delivery", event="push", outcome="relayed", head_sha="a" * 40)
    Dispatch.objects.create(delivery=delivery, project=project, event_type="push", head_sha="a" * 40, state="sent")
    runs = itertools.count(1)

    def post(workflow_patch: dict | None = None, body: dict | None = None, raw: bytes | None = None):
        from django.test import Client

        if raw is None:
            if body is None:
                body = callback_body(
                    "hostile-delivery", "in_progress", run_id=str(next(runs)), job="test", head_sha="a" * 40
                )
                body["workflow"].update(workflow_patch or {})
            raw = json.dumps(body, allow_nan=True).encode()
        token = oidc.mint(repository="hostile/backend", repository_id="4242")
        return Client(raise_request_exception=False).post(
            "/github/callback", data=raw, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )

    return post


HOSTILE_WORKFLOWS = [
    pytest.param({"job_name": "build\x00"}, id="NUL in the job name"),
    pytest.param({"name": "ci\x00"}, id="NUL in the workflow name"),
    pytest.param({"name": "ci\ud800"}, id="lone surrogate in the workflow name"),
    pytest.param({"environment": {"driver": "1.0\x00"}}, id="NUL in an environment value"),
    pytest.param({"failed_tests": [{"name": "test_x\x00"}]}, id="NUL in a failed test name"),
    pytest.param({"failed_tests": [{"name": "test_x", "message": "\udfff"}]}, id="lone surrogate in a failure message"),
    pytest.param({"run_attempt": float("inf")}, id="run_attempt 1e400 (infinity)"),
    pytest.param({"started_at": "2026-13-45T00:00:00Z"}, id="started_at on the 45th of the 13th month"),
    pytest.param({"completed_at": "2026-02-30T10:00:00+00:00"}, id="completed_at on February 30th"),
    pytest.param({"environment": {"load": float("nan")}}, id="NaN in the environment"),
    pytest.param({"test_results": {"passed": 2**40}}, id="a test count beyond 32 bits"),
    pytest.param({"test_results": {"passed": 10**30}}, id="a test count beyond 64 bits"),
    pytest.param({"run_id": "9" * 100, "job_name": "j" * 255, "name": "w" * 255}, id="every field at its length limit"),
    pytest.param(
        {"environment": {"k" * 64: "v" * 500}, "failed_tests": [{"name": "n" * 5000, "message": "m" * 10_000}]},
        id="over-long values are cut",
    ),
    *(
        pytest.param({field: text}, id=f"{field} as JSON text: {what}")
        for field in ("failed_tests", "test_results", "triage_verdict")
        for what, text in JSON_TEXTS.items()
    ),
    *(
        pytest.param({field: stamp}, id=f"{field} {stamp}")
        for field in ("started_at", "completed_at")
        for stamp in OUT_OF_CALENDAR
    ),
    *(
        pytest.param(
            {"triage_verdict": {**VALID_WORKFLOW["triage_verdict"], "analyzed_at": stamp}}, id=f"analyzed_at {stamp}"
        )
        for stamp in OUT_OF_CALENDAR
    ),
    *(pytest.param({"run_attempt": spelled(2, d)}, id=f"run_attempt {spelled(2, d)}") for d in FEW_DIGITS),
    *(pytest.param({"run_attempt": value}, id=f"run_attempt {value!r}") for value in ("1_0", 2.9, "2.0", " 2")),
    *(
        pytest.param(
            {"triage_verdict": {**VALID_WORKFLOW["triage_verdict"], "schema_version": d}}, id=f"schema_version {d}"
        )
        for d in FEW_DIGITS
    ),
    *(pytest.param({"job_name": f"test{c}add", "name": f"ci{c}"}, id=f"U+{ord(c):04X} in names") for c in INVISIBLE),
]


@pytest.mark.parametrize("patch", HOSTILE_WORKFLOWS)
def test_the_callback_endpoint_refuses_hostile_values_with_a_4xx_not_a_500(callback_world, patch):
    response = callback_world(patch)
    assert response.status_code < 500, f"{response.status_code}: {response.content[:200]!r}"


def test_a_deeply_nested_callback_body_is_a_400_not_a_500(callback_world):
    response = callback_world(raw=b"[" * 100_000 + b"]" * 100_000)
    assert response.status_code == 400, response.status_code


@pytest.mark.parametrize("depth, status", [(63, 200), (64, 200), (65, 400), (1000, 400), (1024, 400), (1025, 400)])
def test_a_callback_nested_at_and_past_the_limit_is_stored_or_a_400(callback_world, depth, status):
    body = callback_body("hostile-delivery", "in_progress", run_id=f"deep-{depth}", job="test", head_sha="a" * 40)
    raw = json.dumps(body).encode().replace(b'"workflow": {', b'"workflow": {"extra": ' + nested(depth - 2) + b", ", 1)
    assert callback_world(raw=raw).status_code == status


@pytest.mark.parametrize("depth, status", [(64, None), (65, 400), (1024, 400)])
def test_a_signed_webhook_nested_at_and_past_the_limit_is_read_or_a_400(depth, status):
    body = b'{"zen": "x", "hook_id": 1, "deep": ' + nested(depth - 1) + b"}"
    headers = webhook_headers("ping", f"deep-{depth}", "application/json", signature_expected(SECRET, body))
    if status is None:
        assert webhook_read(headers, body, SECRET).payload["zen"] == "x"
        return
    with pytest.raises(WebhookRejected) as refused:
        webhook_read(headers, body, SECRET)
    assert refused.value.status == status


@settings(max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(workflow=st.one_of(patched_workflows, workflows))
@example(workflow=patched([(("run_attempt",), float("inf"))]))
def test_the_callback_endpoint_never_answers_500(callback_world, workflow):
    body = callback_body("hostile-delivery", "in_progress", run_id="1", job="test", head_sha="a" * 40)
    body["workflow"] = workflow
    response = callback_world(body=body)
    assert response.status_code < 500, f"{response.status_code} for {workflow!r}"


# --- schemathesis over the read API --------------------------------------------------------------


def _api_schema():
    """The live schema, served by the app itself through WSGI (loaded when the module is, which
    touches no database). Loaded eagerly: schemathesis' lazy `from_fixture` does not run under
    pytest 9."""
    from crcr.wsgi import application

    return schemathesis.openapi.from_wsgi("/api/schema/", application)


schema = _api_schema()


@pytest.fixture
def api_store(db, monkeypatch):
    """A small store so reads return rows; the per-client throttle is not what is fuzzed here."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    from tests.factories import DispatchFactory, FailedTestFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

    monkeypatch.setattr("api.throttling.TokenRateThrottle.allow_request", lambda self, request, view: True)
    project = ProjectFactory(full_name="fuzz/backend", level="L3", device="fuzz")
    DispatchFactory(project=project)
    UpstreamCommitFactory()
    FailedTestFactory(job_run=JobRunFactory(project=project, conclusion="failure"))
    # Raw WSGI calls (unlike Django's test client) start and end with close_old_connections,
    # which would close the test's own connection inside its transaction.
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@schema.include(method="GET").parametrize()
@settings(max_examples=20, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
def test_the_read_api_conforms_to_its_schema(case, api_store):
    """Never a 5xx, and every answer conforms to what the schema documents (body, content type,
    headers). Not gated here, and listed in docs/reliability.md instead: undocumented 404/401
    (`status_code_conformance`), reads served with a bogus credential (`ignored_auth`: reads are
    public by design, but the schema does not mark auth optional) and lenient query parsing
    (`negative_data_rejection`: `?pr=0.5`, `?until=`, `?page_size=null` are read, not refused).
    `/api/v1/allowlist` answers YAML documented as a string, which schemathesis parses as YAML."""
    gated = [checks.not_a_server_error, checks.content_type_conformance, checks.response_headers_conformance]
    if case.operation.path != "/api/v1/allowlist":
        gated.append(checks.response_schema_conformance)
    case.call_and_validate(checks=gated)


EDGE_READS = [
    "/api/v1/jobs/99999999999999999999/",
    "/api/v1/jobs/?pr=99999999999999999999",
    "/api/v1/deliveries/?pr=1e400",
    "/api/v1/jobs/?since=9999-12-31T23:59:59-23:59",
    "/api/v1/jobs/?until=0001-01-01T00:00:00%2B23:59",
    "/api/v1/jobs/?run_id=%00",
    "/api/v1/projects/a%00b/",
    "/api/v1/commits/?branch=%00",
    "/api/v1/jobs/?cursor=%00%00",
    "/api/v1/jobs/?page_size=99999999999999999999",
    "/api/v1/prs/99999999999999999999/",
    "/api/v1/prs/99999999999999999999/gate/",
    "/pr/99999999999999999999",
    "/?name=%00",
]


@pytest.mark.parametrize("url", EDGE_READS)
def test_reads_answer_edge_values_without_a_500(db, url):
    from django.test import Client

    response = Client(raise_request_exception=False).get(url)
    assert response.status_code < 500, f"{url}: {response.status_code}"
