"""GET /api/v1/causes and /api/v1/causes/<id>: the causes pages' answers as JSON."""

import pytest

from relay.models import FailureCause
from tests.relay.causes.conftest import world_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db):
    return world_build()


def test_the_list_gives_each_cause_with_its_impact(api, world):
    response = api.get("/api/v1/causes?backend=intel/torch-xpu-ops")
    assert response.status_code == 200
    causes = {c["rule"]: c for c in response.json()["causes"]}
    fft = causes["NotImplementedError: aten::_fft_c2c"]
    assert (fft["kind"], fft["operator"], fft["tests"], fft["commits"], fft["shared_with_reference"]) == (
        "missing_operator",
        "aten::_fft_c2c",
        3,
        3,
        False,
    )
    assert fft["backends"] == ["Ascend/pytorch", "intel/torch-xpu-ops"]
    assert causes["IndexError: index <n> is out of bounds for dimension <n> with size <n>"]["shared_with_reference"]


@pytest.mark.parametrize(
    ("query", "field"),
    [("?nope=1", "unknown filter nope"), ("?kind=x", "kind:"), ("?limit=0", "limit:"), ("?operator=a b", "operator:")],
)
def test_a_bad_filter_is_a_400_saying_which(api, world, query, field):
    response = api.get("/api/v1/causes" + query)
    assert response.status_code == 400
    assert field in str(response.json()["errors"])


def test_one_cause_in_full(api, world):
    cause = FailureCause.objects.get(exception="AssertionError")
    body = api.get(f"/api/v1/causes/{cause.pk}").json()
    assert (body["rule"], body["shared_with_reference"], body["runs"]) == (
        "AssertionError: Tensor-likes are not close!",
        False,
        3,
    )
    assert [b["backend"] for b in body["backends"]] == ["intel/torch-xpu-ops"]
    assert api.get("/api/v1/causes/99999").status_code == 404
