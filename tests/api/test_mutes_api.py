"""Mutes over the API: a backend's own token mutes for that backend only; an admin for any;
extend and lift; every write audited; the list is public."""

import pytest
from rest_framework.test import APIClient

from api.models import backend_scope
from relay.models import TestMute
from tests.factories import ProjectFactory

from .conftest import _client

pytestmark = pytest.mark.django_db
ADDMM = "test_ops.TestCommon.test_addmm_float32"


@pytest.fixture
def xpu():
    return ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")


@pytest.fixture
def rocm():
    return ProjectFactory(full_name="ROCm/pytorch", level="L3")


@pytest.fixture
def maintainer(xpu):
    """An Intel XPU maintainer's token: backend:intel/torch-xpu-ops."""
    return _client("dana", ["read", backend_scope(xpu.full_name)])


def body(backend="intel/torch-xpu-ops", **fields):
    return {
        "backend": backend,
        "test_id": ADDMM,
        "reason": "fixed upstream in #150001",
        "owner": "xpu-oncall",
        **fields,
    }


def test_a_backend_s_maintainer_mutes_its_own_test_with_a_default_expiry(maintainer):
    response = maintainer.post("/api/v1/mutes", body(), format="json")
    assert response.status_code == 201, response.content
    mute = response.json()
    assert (mute["backend"], mute["test_id"], mute["active"], mute["events"][0]["action"]) == (
        "intel/torch-xpu-ops",
        ADDMM,
        True,
        "muted",
    )
    assert mute["created_by"] == "dana (API token: dana's token)"


def test_a_backend_s_token_cannot_mute_for_another_backend(maintainer, rocm):
    response = maintainer.post("/api/v1/mutes", body(backend="ROCm/pytorch"), format="json")
    assert response.status_code == 403 and "ROCm/pytorch" in response.json()["detail"]
    assert not TestMute.objects.exists()


def test_an_admin_mutes_for_any_backend_and_a_reader_for_none(carol, bob, rocm):
    assert carol.post("/api/v1/mutes", body(backend="rocm/pytorch"), format="json").status_code == 201
    assert (
        bob.post("/api/v1/mutes", body(backend="ROCm/pytorch", test_id=ADDMM + "x"), format="json").status_code == 403
    )
    assert APIClient().post("/api/v1/mutes", body(), format="json").status_code in (401, 403)


def test_it_is_extended_then_lifted_and_the_list_filters_by_state(maintainer, xpu):
    pk = maintainer.post("/api/v1/mutes", body(days=3), format="json").json()["id"]
    extended = maintainer.post(f"/api/v1/mutes/{pk}/extend", {"days": 20, "note": "slipped"}, format="json")
    assert extended.status_code == 200 and [e["action"] for e in extended.json()["events"]] == ["muted", "extended"]
    assert maintainer.post(f"/api/v1/mutes/{pk}/lift", {}, format="json").json()["active"] is False
    public = APIClient()
    assert [m["id"] for m in public.get("/api/v1/mutes", {"active": "false"}).json()["results"]] == [pk]
    assert public.get("/api/v1/mutes", {"active": "true", "backend": "intel/torch-xpu-ops"}).json()["results"] == []


def test_bad_input_is_a_400_that_says_what_is_wrong(maintainer):
    assert maintainer.post("/api/v1/mutes", body(days=200), format="json").status_code == 400
    assert maintainer.post("/api/v1/mutes", body(reason=""), format="json").status_code == 400
    assert maintainer.post("/api/v1/mutes", body(test_id="not a test"), format="json").status_code == 400
    maintainer.post("/api/v1/mutes", body(), format="json")
    again = maintainer.post("/api/v1/mutes", body(), format="json")
    assert again.status_code == 400 and "already muted" in str(again.json())
    assert maintainer.post("/api/v1/mutes/999999/lift", {}, format="json").status_code == 404


def test_a_backend_that_mutes_only_with_a_tracking_issue_answers_400_without_one(maintainer, xpu):
    xpu.mute_needs_issue = True
    xpu.save(update_fields=["mute_needs_issue"])
    refused = maintainer.post("/api/v1/mutes", body(), format="json")
    assert refused.status_code == 400 and "only with its tracking issue" in str(refused.json())
    assert not TestMute.objects.exists()
    tracker = "https://github.com/intel/torch-xpu-ops/issues/4961"
    made = maintainer.post("/api/v1/mutes", body(tracking_issue=tracker), format="json")
    assert made.status_code == 201 and made.json()["tracking_issue"] == tracker
