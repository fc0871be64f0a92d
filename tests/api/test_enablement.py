"""GET /api/v1/enablement and /api/v1/enablement/<owner>/<repo>: the table and one backend's
modules, skips, un-skip candidates and history, as the pages show them."""

import json

import pytest

from tests.hud.test_views_enablement import store  # noqa: F401

pytestmark = pytest.mark.django_db


def test_the_api_answers_the_table_and_a_backends_modules(bob, store):  # noqa: F811
    reference, backend, before, broke = store
    table = bob.get("/api/v1/enablement").json()
    assert [row["backend"] for row in table["backends"]] == ["pytorch/openreg-ci", "intel/torch-xpu-ops"]
    eager = table["backends"][1]["paths"]["eager ops"]
    assert (eager["passed"], eager["ran"], eager["parity"], eager["trend"]) == (60, 63, 0.6, -10)
    modules = bob.get("/api/v1/enablement/intel/torch-xpu-ops").json()
    (ops,) = [m for m in modules["modules"] if m["module"] == "test_ops"]
    assert ops["skipped_since"] == {"added": 12, "sha": broke.sha}
    assert ops["reference"]["passed"] == 100
    assert modules["unskip_candidates"] == ["test_ops.TestCommon.test_foo_float32"]
    assert [day["passed"]["eager ops"] for day in modules["history"]] == [70, 60]
    json.dumps(modules)


def test_the_api_refuses_an_unknown_path_and_backend(bob, store):  # noqa: F811
    refused = bob.get("/api/v1/enablement/intel/torch-xpu-ops?path=quantum")
    assert refused.status_code == 400 and "unknown integration path" in json.dumps(refused.json())
    assert bob.get("/api/v1/enablement/acme/none").status_code == 404
