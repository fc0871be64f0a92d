"""GET /api/v1/enablement and /api/v1/enablement/<owner>/<repo>: the table and one backend's
modules, skips, un-skip candidates and history, as the pages show them."""

import json

import pytest

from tests.hud.test_views_enablement import store, with_variants  # noqa: F401

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


def test_the_api_splits_a_backend_declaring_variants(bob, store):  # noqa: F811
    reference, backend, before, broke = store
    with_variants(backend, broke.sha)
    [row] = [r for r in bob.get("/api/v1/enablement").json()["backends"] if r["backend"] == backend.full_name]
    variants = {v["variant"]: v["paths"]["eager ops"] for v in row["variants"]}
    assert variants["Max 1550 · ubuntu-24.04"]["passed"] == 40 and variants[""]["passed"] == 60
    assert row["paths"]["eager ops"]["passed"] == 100


def test_the_api_reads_one_variant_s_modules(bob, store):  # noqa: F811
    reference, backend, before, broke = store
    with_variants(backend, broke.sha)
    url = f"/api/v1/enablement/{backend.full_name}"
    assert bob.get(url).json()["variants"] == ["", "Max 1550 · ubuntu-24.04"]
    [ops] = bob.get(url, {"variant": "Max 1550 · ubuntu-24.04"}).json()["modules"]
    assert (ops["module"], ops["passed"], ops["reference"]["passed"]) == ("test_ops", 40, 100)
