"""GET /api/v1/bisections: each bisection's state, probes and result, filtered by state, backend
and culprit; and bisection's registry settings through /api/v1/projects."""

import pytest

from tests.factories import ProjectFactory, UpstreamCommitFactory
from tests.relay.bisect.conftest import bisection_of, run_to_the_end, sha_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def verified(db):
    npu = ProjectFactory(full_name="Ascend/pytorch", display_name="Ascend NPU", bisect_enabled=True)
    UpstreamCommitFactory(sha=sha_of(11), title="[npu] Change the add kernel (#151234)")
    return run_to_the_end(bisection_of(npu, 17), 11)


def test_it_lists_a_bisection_with_its_probes_and_its_verified_culprit(api, verified):
    body = api.get("/api/v1/bisections").json()["bisections"]
    assert len(body) == 1
    found = body[0]
    assert (found["backend"], found["state"], found["commits"]) == ("Ascend/pytorch", "verified", 17)
    assert found["result"]["culprit_sha"] == sha_of(11) and found["result"]["verified"] is True
    assert found["result"]["culprit_pr"] == 151234 and found["result"]["culprit_pr_url"] == "/pr/151234"
    assert found["result"]["summary"] == (
        "verified culprit of test_add_float32 on Ascend NPU (by Ascend NPU's own probes at L2),"
        " bisected over 17 commits in 4 runs (+2 to verify)"
    )
    assert found["result"]["verified_by"] == {"backend": "Ascend/pytorch", "label": "Ascend NPU", "level": "L2"}
    assert found["result"]["upstream_trusted"] is False
    assert [p["role"] for p in found["probes"]][-2:] == ["culprit", "parent"]
    assert {p["outcome"] for p in found["probes"]} <= {"fail", "pass"}
    assert found["result"]["dispatches"] == len(found["probes"]) == 6


def test_it_filters_by_state_backend_and_culprit(api, verified):
    assert len(api.get("/api/v1/bisections", {"state": "verified"}).json()["bisections"]) == 1
    assert api.get("/api/v1/bisections", {"state": "timed_out"}).json()["bisections"] == []
    assert len(api.get("/api/v1/bisections", {"backend": "ascend/PyTorch"}).json()["bisections"]) == 1
    assert len(api.get("/api/v1/bisections", {"culprit": sha_of(11)[:10]}).json()["bisections"]) == 1
    assert api.get("/api/v1/bisections", {"culprit": sha_of(3)[:10]}).json()["bisections"] == []


@pytest.mark.parametrize(
    "query", [{"state": "done"}, {"culprit": "xyz"}, {"culprit": "abc"}, {"sha": "a" * 40}], ids=str
)
def test_a_bad_filter_is_a_400(api, query):
    assert api.get("/api/v1/bisections", query).status_code == 400


def test_one_bisection_answers_as_in_the_list_and_an_unknown_one_404(api, verified):
    one = api.get(f"/api/v1/bisections/{verified.pk}").json()
    assert one == api.get("/api/v1/bisections").json()["bisections"][0]
    assert api.get("/api/v1/bisections/999999").status_code == 404


def test_a_backend_opts_in_with_a_budget_and_its_event_type(alice, db):
    ProjectFactory(full_name="a/b")
    assert alice.get("/api/v1/projects/a/b/").json()["bisect_enabled"] is False
    response = alice.patch(
        "/api/v1/projects/a/b/",
        {"bisect_enabled": True, "bisect_daily_budget": 8, "bisect_event_type": "npu-bisect"},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["bisect_enabled"], body["bisect_daily_budget"], body["bisect_event_type"]) == (True, 8, "npu-bisect")


@pytest.mark.parametrize("change", [{"bisect_daily_budget": -1}, {"bisect_event_type": "no spaces"}], ids=str)
def test_a_bad_bisection_setting_is_a_400(alice, db, change):
    ProjectFactory(full_name="a/b")
    assert alice.patch("/api/v1/projects/a/b/", change, format="json").status_code == 400


def test_a_backend_registered_through_the_api_may_opt_in_at_once(alice, db):
    body = {"full_name": "Ascend/pytorch", "level": "L1", "bisect_enabled": True, "bisect_daily_budget": 10}
    response = alice.post("/api/v1/projects/", body, format="json")
    assert response.status_code == 201, response.content
    created = response.json()
    assert (created["bisect_enabled"], created["bisect_daily_budget"], created["bisect_event_type"]) == (
        True,
        10,
        "crcr-bisect",
    )
