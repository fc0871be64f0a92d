"""Every page × every query parameter × a list of hostile values: no answer is a 5xx.

The reviews found one odd character at a time (`²` in a page number, a non-hex SHA, `1e999`);
this table finds the next one. Pages and their parameters are listed here, and two checks keep
the list whole: every GET route the URL configuration has is swept (or named as not a page), and
every parameter name the views read from a query string is in the table. API endpoints take
their parameters from the OpenAPI schema, so a new filter is swept the day it is added. (The
sweeps are marked slow — a few minutes in all — and run in `make test`, hence `.ci/run`.) The
values include digits of other scripts (tests/security/hostile_values.py), invisible characters
and timestamps that leave the calendar once in UTC; the last section reads every one of Unicode's
non-ASCII digits (Nd and No) through every number reader."""

import json
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from django import forms
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework import serializers

from relay.models import PullRequest
from relay.models.notify import Subscription
from tests.factories import (
    DeliveryFactory,
    DispatchFactory,
    FailedTestFactory,
    JobRunFactory,
    ProjectFactory,
    UpstreamCommitFactory,
)
from tests.security.hostile_values import (
    CONTROL_CHARS,
    DIGITS_ND,
    DIGITS_NO,
    FEW_DIGITS,
    INVISIBLE,
    OUT_OF_CALENDAR,
    nested,
    spelled,
)

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
SHA = "a" * 40

HOSTILE = [
    "²",
    "١٢",
    "𝟗",
    "-1",
    "0",
    "9" * 30,
    "1e999",
    "NaN",
    "-Infinity",
    " 1",
    "1,²,x,,",
    "",
    "\x00",
    "\u202egnp.exe",
    "\n\r\x1b[2J",
    "<script>alert(1)</script>",
    "'\"><svg onload=alert(1)>",
    "javascript:alert(1)",
    "//evil.example/x",
    "../../etc/passwd",
    "(a+)+$",
    "*",
    "%",
    "{{7*7}}",
    "🙂",
    "all",
    "a" * 5000,
    f"{SHA}.²",
    f"{SHA}.99999999999999999999",
    f"{SHA[:7]}:x",
    "abc.1",
    *(spelled(12, d) for d in FEW_DIGITS),
    *(f"a{c}b" for c in INVISIBLE),
    *OUT_OF_CALENDAR,
    f"{SHA}.{spelled(12, '١')}",
]
CORE = ["²", "١٢", "9" * 30, "1e999", "-1", "", "\x00", "\u202egnp.exe", "<script>alert(1)</script>", "a" * 5000]
CORE += [f"{SHA}.²", "abc.1", "(a+)+$", "🙂", "३", "𝟏", "①", "\u200bx", OUT_OF_CALENDAR[0]]
"""Tried on every parameter alone; the whole list is tried on all of a page's parameters at once."""
RAW = ["%ED%A0%80", "%FF%FE", "%C0%AE"]
"""Percent-escapes that decode to no valid UTF-8 (a lone surrogate, stray bytes, an overlong dot)."""

PAGES = {
    # path: (who, the query parameters the page reads)
    "/": (
        "anonymous",
        [
            "tip",
            "log",
            "job",
            "level",
            "device",
            "hw",
            "name",
            "regex",
            "hide_green",
            "failures",
            "heads",
            "page",
            "expand",
        ],
    ),
    f"/commit/{SHA}": ("anonymous", ["open", "tests"]),
    "/pr/100": ("anonymous", []),
    "/search": ("anonymous", ["q"]),
    "/crcr": ("anonymous", ["range", "event"]),
    "/crcr/metrics": ("anonymous", ["range", "event", "level", "backend"]),
    "/crcr/health/probe": ("anonymous", []),
    "/metrics": ("anonymous", []),
    "/crcr/intel/torch-xpu-ops": ("anonymous", ["range", "event", "page", "shards", "cell"]),
    "/known-issues": ("anonymous", ["state"]),
    "/known-issues/new": ("superuser", ["title", "pattern", "kind", "project", "also", "sha", "cause"]),
    "/causes": ("anonymous", ["backend", "kind", "sha", "operator", "shared", "days", "limit"]),
    "/causes/1": ("anonymous", []),
    "/crcr/enablement": ("anonymous", []),
    "/crcr/enablement/intel/torch-xpu-ops": ("anonymous", ["path", "variant"]),
    "/known-issues/suggested": ("anonymous", []),
    "/known-issues/{issue}": ("anonymous", []),
    "/test/test_ops.TestX.test_add": ("anonymous", ["after"]),
    "/healthz": ("anonymous", []),
    "/relay/deliveries": ("superuser", ["event", "action", "status", "page", "view"]),
    "/notifications": ("superuser", ["subscription", "state"]),
    "/accounts/login/": ("anonymous", ["next"]),
}
PAIRED = {"/": [("regex", "1", "name"), ("heads", "pr", "page"), ("failures", "1", "expand")]}
"""Parameters that matter only with another set: (fixed name, its value, the swept one)."""
NOT_PAGES = {
    "github-webhook",  # POST only: test_hostile_requests.py and tests/relay/test_intake.py
    "github-callback",  # POST only: tests/reliability/test_hostile_input.py
    "hud-known-issue-state",  # POST only
    "hud-cause-known-issue",  # POST only: tests/hud/test_causes_pages.py
    "admin",  # Django's own
    "favicon",
}


@pytest.fixture
def world(django_user_model):
    from relay.triage import issues

    ref = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, display_name="OpenReg")
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4", display_name="Intel XPU")
    UpstreamCommitFactory(sha="b" * 40, title="Parent (#99)")
    UpstreamCommitFactory(sha=SHA, title="Fix \u202eadd (#100)", parent_sha="b" * 40)
    UpstreamCommitFactory(sha="c" * 40, is_trunk=False, pr_number=100, title="Fix add")
    PullRequest.objects.create(number=100, head_sha="c" * 40, base_sha="b" * 40)
    JobRunFactory(project=ref, head_sha=SHA, conclusion="success", tests_total=5)
    job = JobRunFactory(
        project=xpu, head_sha=SHA, conclusion="failure", job_name="test (², 3)", check_run_id="²", tests_failed=1
    )
    FailedTestFactory(job_run=job, classname="TestX\x1b", name="test_add\u202e")
    muted_job = JobRunFactory(
        project=xpu, head_sha=SHA, conclusion="failure", job_name="test-2", tests_total=9, tests_failed=1
    )
    FailedTestFactory(job_run=muted_job, classname="test_ops.TestCommonXPU", name="test_addmm_xpu_float32\nx")
    mute = _muted_as_stored_before_the_rule(xpu, "test_ops.TestCommon.test_addmm_float32\nx")
    JobRunFactory(project=xpu, head_sha="c" * 40, pr_number=100, conclusion="success", job_name="test-1")
    DispatchFactory(project=xpu, delivery=DeliveryFactory(head_sha=SHA), head_sha=SHA, state="sent")
    issue = issues.known_issue_create({"title": "add fails", "test_patterns": ["TestX*"]}, by="alice")
    Subscription.objects.create(name="hook", channel="webhook", target="https://u:p@hooks.example.com/x?t=1")
    django_user_model.objects.create_superuser("root", "root@example.org", "x" * 24)
    return {"issue": issue, "mute": mute}


def _muted_as_stored_before_the_rule(project, raw: str):
    """A test identity holding a newline, as the store wrote it before relay.inputs.text.escaped, with
    an active mute: every page that joins mutes meets it (issue 52, item 1)."""
    from datetime import timedelta

    from django.utils import timezone

    from relay.models import TestIdentity, TestMute
    from relay.policy.testids import TestId

    module, _, key = raw.partition(".")
    tid = TestId(module, key)
    identity = TestIdentity.objects.get(pk=TestIdentity.objects.ids_for({tid})[tid])
    expires = timezone.now() + timedelta(days=3)
    return TestMute.objects.create(
        identity=identity, project=project, reason="r", owner="o", created_by="x", expires_at=expires
    )


def query_strings(path: str, params: list[str]):
    for name in params:
        for value in CORE:
            yield f"{name}={quote(value)}"
        yield f"{name}={RAW[0]}"
    for fixed, fixed_value, name in PAIRED.get(path, []):
        for value in CORE:
            yield f"{fixed}={fixed_value}&{name}={quote(value)}"
    for value in [*HOSTILE, *RAW]:  # every parameter at once
        yield "&".join(f"{name}={value if value in RAW else quote(value)}" for name in params)


def sweep(client, path: str, queries) -> list[str]:
    failures = []
    for query in queries:
        response = client.get(path, QUERY_STRING=query)
        if response.status_code >= 500:
            failures.append(f"{response.status_code} {path}?{query[:120]}")
    return failures


@pytest.mark.slow
@pytest.mark.parametrize("path", list(PAGES))
def test_no_hostile_query_value_makes_a_page_answer_5xx(client, world, path):
    who, params = PAGES[path]
    if who == "superuser":
        client.login(username="root", password="x" * 24)
    path = path.format(issue=world["issue"].pk)
    assert sweep(client, path, query_strings(path, params)) == []


@pytest.mark.slow
@pytest.mark.parametrize(
    "template",
    [
        "/crcr/{}/torch-xpu-ops",
        "/crcr/intel/{}",
        "/commit/{}",
        "/pr/{}",
        "/known-issues/{}",
        "/test/{}",
        "/api/v1/tests/{}/history",
        "/api/v1/mutes/{}/extend",
        "/api/v1/bisections/{}",
    ],
)
def test_no_hostile_path_segment_makes_a_page_answer_5xx(client, world, template):
    values = [*HOSTILE[:-5], "a" * 7, "A" * 40, "f" * 39 + "²", "9" * 9, "0"]
    values += [f"test_ops.TestCommon.test_add{c}x" for c in CONTROL_CHARS]
    failures = []
    for value in values:
        if not value or "/" in value:
            continue
        response = client.get(template.format(quote(value, safe="")))
        if response.status_code >= 500:
            failures.append(f"{response.status_code} {template.format(value[:60])}")
    assert failures == []


# --- the API, parameters from its schema --------------------------------------------------------------


def api_reads() -> dict[str, list[str]]:
    """Every GET path of the OpenAPI schema with its query parameters."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    reads = {}
    for path, operations in schema["paths"].items():
        if "get" in operations:
            reads[path] = [p["name"] for p in operations["get"].get("parameters", []) if p["in"] == "query"]
    return reads


def api_path(template: str, world) -> str:
    values = {"full_name": "intel/torch-xpu-ops", "sha": SHA, "number": "100", "id": str(world["issue"].pk)}
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), "1"), template)


@pytest.mark.slow
def test_no_hostile_query_value_makes_an_api_read_answer_5xx(client, world):
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    api = APIClient()
    api.force_authenticate(user=get_user_model().objects.get(username="root"))
    failures = []
    reads = api_reads()
    assert len(reads) >= 10, reads
    for template, params in reads.items():
        path = api_path(template, world)
        for query in query_strings(path, params):
            response = api.get(path, QUERY_STRING=query)
            if response.status_code >= 500:
                failures.append(f"{response.status_code} {path}?{query[:120]}")
    assert failures == []


# --- API writes: hostile bodies on every write the schema has ---------------------------------------


def api_writes() -> dict[tuple[str, str], dict]:
    """Every write operation of the OpenAPI schema with its JSON body's properties."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema.get("components", {}).get("schemas", {})
    writes = {}
    for path, operations in schema["paths"].items():
        for method in ("post", "put", "patch"):
            body = operations.get(method, {}).get("requestBody", {}).get("content", {}).get("application/json")
            if body is None:
                continue
            ref = body["schema"].get("$ref", "")
            writes[(method, path)] = components.get(ref.rsplit("/", 1)[-1], {}).get("properties", {})
    return writes


BASES = {
    ("post", "/api/v1/mutes/"): {
        "backend": "intel/torch-xpu-ops",
        "test_id": "test_ops.TestCommon.test_sub_float32",
        "reason": "r",
        "owner": "o",
    },
}
"""A valid body the swept property replaces one field of, where the write needs several."""


def hostile_bodies(properties: dict, base: dict):
    """The whole body nested past every limit, then each property set to each value a reviewer
    sent (other scripts' digits, control characters, the rest of CORE), the rest of `base` kept."""
    yield nested(5000)
    yield b'{"a": ' + nested(65) + b"}"
    values = [*CORE, *(spelled(3, d) for d in FEW_DIGITS), *(f"a{c}b" for c in CONTROL_CHARS)]
    values += [f"{spelled(2026, '١')}-01-01T00:00:00Z", OUT_OF_CALENDAR[1], 1e308, 2**70, [], {}]
    for name in properties:
        for value in values:
            yield json.dumps({**base, name: value}).encode()


@pytest.mark.slow
def test_no_hostile_body_makes_an_api_write_answer_5xx(world):
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    from api.models import ApiToken

    _, raw = ApiToken.issue(get_user_model().objects.get(username="root"), "sweep", ["admin"])
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    writes = api_writes()
    assert {("post", "/api/v1/mutes/"), ("post", "/api/v1/mutes/{id}/extend/")} <= set(writes), sorted(writes)
    failures = []
    for (method, template), properties in writes.items():
        path = api_path(template, world)
        if "/mutes/" in template:
            path = template.replace("{id}", str(world["mute"].pk))
        for body in hostile_bodies(properties, BASES.get((method, template), {})):
            response = getattr(api, method)(path, data=body, content_type="application/json")
            if response.status_code >= 500:
                failures.append(f"{response.status_code} {method} {path} {body[:80]!r}")
    assert failures == []


# --- the table is whole ----------------------------------------------------------------------------


def route_names(resolver=None, prefix="") -> set[str]:
    names = set()
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            if entry.app_name == "admin":
                names.add("admin")
                continue
            names |= route_names(entry, prefix)
        elif isinstance(entry, URLPattern):
            names.add(entry.name or entry.lookup_str.rsplit(".", 1)[-1])
    return names


SWEPT_ROUTES = {
    "hud-grid": "/",
    "hud-commit": f"/commit/{SHA}",
    "hud-pr": "/pr/100",
    "hud-search": "/search",
    "hud-summary": "/crcr",
    "hud-metrics": "/crcr/metrics",
    "hud-health-card": "/crcr/health/probe",
    "prometheus-metrics": "/metrics",
    "hud-backend": "/crcr/intel/torch-xpu-ops",
    "hud-known-issues": "/known-issues",
    "hud-known-issue-new": "/known-issues/new",
    "hud-suggested": "/known-issues/suggested",
    "hud-known-issue": "/known-issues/{issue}",
    "hud-causes": "/causes",
    "hud-cause": "/causes/1",
    "hud-enablement": "/crcr/enablement",
    "hud-enablement-backend": "/crcr/enablement/intel/torch-xpu-ops",
    "hud-test": "/test/test_ops.TestX.test_add",
    "healthz": "/healthz",
    "relay-deliveries": "/relay/deliveries",
    "relay-notifications": "/notifications",
    "login": "/accounts/login/",
}


def test_every_page_route_is_swept():
    api = {name for name in route_names() if name.startswith("api-") or name.endswith(("-list", "-detail", "-root"))}
    api |= {n for n in route_names() if n.startswith(("project-", "delivery-", "dispatch-", "jobrun-", "commit-"))}
    api |= {n for n in route_names() if n.startswith(("knownissue-", "subscription-"))}
    unswept = route_names() - set(SWEPT_ROUTES) - NOT_PAGES - api
    assert unswept == set()
    assert set(SWEPT_ROUTES.values()) == set(PAGES)


PARAM_READ = re.compile(r"""(?:GET|query|get|query_params)\.(?:get|getlist)\(\s*["']([A-Za-z_]+)["']""")


def test_every_query_parameter_a_view_reads_is_in_the_table():
    read = set()
    for package in ("hud", "relay", "api"):
        for path in (ROOT / package).rglob("*.py"):
            read |= set(PARAM_READ.findall(path.read_text()))
    swept = {name for _, params in PAGES.values() for name in params}
    swept |= {name for params in api_reads().values() for name in params}
    assert read - swept == set()


# --- every number read × every digit that is not ASCII --------------------------------------------------


def number_readers():
    """Every function that reads a number from outside text, each a predicate: did it read one?"""
    from django.core.management.base import CommandError
    from django.http import QueryDict

    from api.filters import AsciiIntegerFormField, BoundedDateTimeField
    from api.serializers import AsciiDateTimeField as AsciiDateTimeIn
    from api.serializers import AsciiIntegerField as AsciiIntegerIn
    from hud.management.commands.metrics_serve import bind_address
    from hud.paging import tests_page
    from hud.selectors_backend import shard_of
    from hud.selectors_search import PR_NUMBER
    from relay.callbacks.body import BadCallback, _attempt
    from relay.callbacks.triage_verdict import _version
    from relay.inputs.params import aware_datetime, int_list_param, int_param
    from relay.intake.deliveries import TRUNK_TAG_RE
    from relay.reference import unittest_log

    def raises(call, *errors):
        try:
            call()
        except errors:
            return False
        return True

    return {
        "int_param": lambda t: int_param(t) is not None,
        "int_list_param": lambda t: bool(int_list_param(f"{t},{t}")),
        "aware_datetime": lambda t: aware_datetime(f"2026-01-0{t}T00:00:00Z") is not None,
        "run_attempt": lambda t: raises(lambda: _attempt({"run_attempt": t}), BadCallback),
        "schema_version": lambda t: _version(t) is not None,
        "API filter": lambda t: raises(lambda: AsciiIntegerFormField().to_python(t), forms.ValidationError),
        "API date filter": lambda t: raises(
            lambda: BoundedDateTimeField().clean(f"2026-01-0{t}T00:00:00Z"), forms.ValidationError
        ),
        "API write": lambda t: raises(lambda: AsciiIntegerIn().run_validation(t), serializers.ValidationError),
        "API write date": lambda t: raises(
            lambda: AsciiDateTimeIn().run_validation(f"2026-01-0{t}T00:00:00Z"), serializers.ValidationError
        ),
        "metrics_serve --bind": lambda t: raises(lambda: bind_address(f"127.0.0.1:{t}"), CommandError),
        "commit page ?tests=": lambda t: tests_page(QueryDict("tests=" + quote("2" + t))) != 1,
        "unittest's Ran N tests": lambda t: unittest_log._RAN.match(f"Ran {t} tests in 0.1s") is not None,
        "shard suffix": lambda t: shard_of(f"test-{t}") is not None,
        "shard parentheses": lambda t: shard_of(f"test ({t}, {t})") is not None,
        "search PR number": lambda t: PR_NUMBER.match(f"#{t}") is not None,
        "ciflow/trunk tag": lambda t: TRUNK_TAG_RE.fullmatch(f"refs/tags/ciflow/trunk/{t}") is not None,
    }


@pytest.mark.parametrize("category, digits", [("Nd", DIGITS_ND), ("No", DIGITS_NO)])
def test_no_number_read_takes_a_digit_that_is_not_ascii(category, digits):
    """Every one of Unicode's digits, alone and after an ASCII one, in every reader."""
    readers = number_readers()
    read_as_numbers = [
        (name, f"U+{ord(d):04X}") for d in digits for name, read in readers.items() if read(d) or read(f"1{d}")
    ]
    assert read_as_numbers == []


def test_every_number_reader_reads_ascii_digits():
    assert [name for name, read in number_readers().items() if not read("1")] == []
