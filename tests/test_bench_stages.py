"""devtools.bench.stages: each step of a callback timed where the product calls it, and the
report counting every millisecond once (a stage's self time leaves out the stages under it)."""

import io
import json

import pytest

from devtools.bench import stages


def test_self_time_leaves_out_the_stages_below():
    totals = {
        "request": [10_000_000, 12_000_000, 2],
        "callback service": [6_000_000, 7_000_000, 2],
        "OIDC verify": [2_000_000, 2_000_000, 2],
        "body read": [1_000_000, 1_000_000, 2],
    }
    report = stages.per_request(totals)
    assert report["requests"] == 2
    assert report["stages"]["request"]["cpu_ms"] == 5.0
    assert report["stages"]["request"]["self_cpu_ms"] == 1.5  # 10 − 6 − 1 ms over 2 requests
    assert report["stages"]["callback service"]["self_cpu_ms"] == 2.0
    assert report["stages"]["OIDC verify"]["self_wall_ms"] == 1.0


def test_takes_from_several_processes_add_up():
    a = {"pid": 1, "totals": {"request": [1, 2, 3]}}
    b = {"pid": 2, "totals": {"request": [10, 20, 30], "OIDC verify": [5, 5, 5]}}
    assert stages.merged([a, b]) == {"request": [11, 22, 33], "OIDC verify": [5, 5, 5]}


@pytest.fixture
def stage_wrappers(monkeypatch):
    """The stages installed for this test only: monkeypatch puts every original back after."""
    for _stage, module, attribute, _parent in stages.STAGES:
        owner, name = stages.owner_of(module, attribute)
        monkeypatch.setattr(owner, name, getattr(owner, name))
    stages.report_take()
    yield
    stages.report_take()


def test_a_refused_callback_is_timed_up_to_the_step_that_refused_it(stage_wrappers, wsgi_direct):
    from django.middleware.common import CommonMiddleware
    from django.test import RequestFactory

    from crcr.machine import MachineHandler

    request = RequestFactory().post("/github/callback", data=b"{}", content_type="application/json")
    request.environ["HTTP_AUTHORIZATION"] = "Bearer not-a-token"
    request.environ["wsgi.input"] = io.BytesIO(b"{}")
    handler = MachineHandler((stages.StageMiddleware, CommonMiddleware))
    response = handler(request.environ, lambda *args: None)
    assert json.loads(b"".join(response))["detail"].startswith("malformed token")
    totals = stages.report_take()["totals"]
    assert {name: values[2] for name, values in totals.items()} == {
        "request": 1,
        "body read": 1,
        "callback service": 1,
        "body parse (JSON)": 1,
        "OIDC verify": 1,
    }


def test_every_stage_names_a_function_the_product_still_calls_by_that_name():
    for stage, module, attribute, _parent in stages.STAGES:
        owner, name = stages.owner_of(module, attribute)
        assert callable(getattr(owner, name, None)), stage
