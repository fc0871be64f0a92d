"""/api/v1 for known issues, expectations and subscriptions: works, needs auth, wrong scope or
owner, bad input is a clear 400."""

import pytest

from relay.models import Expectation, KnownIssue, Project, Subscription

pytestmark = pytest.mark.django_db
ISSUE = {
    "title": "addmm OOM on XPU",
    "url": "https://github.com/intel/torch-xpu-ops/issues/1234",
    "kind": "product",
    "test_patterns": ["TestCommon.test_addmm*"],
    "all_backends": False,
    "projects": ["intel/torch-xpu-ops"],
}


@pytest.fixture
def xpu(db):
    return Project.objects.create(full_name="intel/torch-xpu-ops", level="L4", hardware_kind="gpu")


def test_it_creates_lists_and_resolves_a_known_issue(alice, api, xpu):
    created = alice.post("/api/v1/known-issues", ISSUE, format="json")
    assert created.status_code == 201, created.json()
    assert created.json()["projects"] == ["intel/torch-xpu-ops"] and created.json()["state"] == "open"
    assert [i["title"] for i in api.get("/api/v1/known-issues?state=open").json()["results"]] == ["addmm OOM on XPU"]
    resolved = alice.patch(f"/api/v1/known-issues/{created.json()['id']}", {"state": "resolved"}, format="json")
    assert resolved.json()["state"] == "resolved" and resolved.json()["resolved_at"]
    assert api.get(f"/api/v1/known-issues/{created.json()['id']}/occurrences").status_code == 200


def test_writing_known_issues_needs_the_write_projects_scope(api, bob, xpu):
    assert api.post("/api/v1/known-issues", ISSUE, format="json").status_code in (401, 403)
    assert bob.post("/api/v1/known-issues", ISSUE, format="json").status_code == 403


def test_only_the_admin_scope_may_make_an_issue_not_block_the_gate(alice, carol, xpu):
    assert alice.post("/api/v1/known-issues", {**ISSUE, "blocks_gate": False}, format="json").status_code == 403
    assert (
        carol.post("/api/v1/known-issues", {**ISSUE, "blocks_gate": False}, format="json").json()["blocks_gate"]
        is False
    )


@pytest.mark.parametrize(
    "change, field",
    [
        ({"test_patterns": ["*"]}, "test_patterns"),
        ({"projects": ["nobody/here"]}, "projects"),
        ({"test_patterns": [], "message_contains": ""}, "non_field_errors"),
    ],
)
def test_a_bad_known_issue_is_a_400_naming_the_field(alice, xpu, change, field):
    response = alice.post("/api/v1/known-issues", {**ISSUE, **change}, format="json")
    assert response.status_code == 400 and field in response.json()["errors"]
    assert not KnownIssue.objects.exists()


def test_a_backend_uploads_its_expectations_file_and_reads_it_back(alice, api, xpu):
    text = "# intel xpu\nTestCommon.test_addmm*,Fail\nTestNN.test_conv2d,Flake  # driver\n"
    response = alice.put("/api/v1/projects/intel/torch-xpu-ops/expectations", text, content_type="text/plain")
    assert response.status_code == 200 and [e["kind"] for e in response.json()] == ["fail", "flaky"]
    assert (
        api.get("/api/v1/projects/intel/torch-xpu-ops/expectations?as=text").content.decode()
        == "TestCommon.test_addmm*,Fail\nTestNN.test_conv2d,Flake  # driver\n"
    )
    assert (
        alice.put(
            "/api/v1/projects/intel/torch-xpu-ops/expectations", {"content": "TestX.test_y,Fail"}, format="json"
        ).status_code
        == 200
    )
    assert list(Expectation.objects.values_list("pattern", flat=True)) == ["TestX.test_y"]


def test_a_bad_expectations_file_is_a_400_and_keeps_the_old_list(alice, xpu):
    alice.put("/api/v1/projects/intel/torch-xpu-ops/expectations", "TestX.test_y,Fail\n", content_type="text/plain")
    response = alice.put(
        "/api/v1/projects/intel/torch-xpu-ops/expectations", "TestX.test_z,Sometimes\n", content_type="text/plain"
    )
    assert response.status_code == 400 and "line 1" in str(response.json()["errors"])
    assert list(Expectation.objects.values_list("pattern", flat=True)) == ["TestX.test_y"]


def test_uploading_expectations_needs_the_scope(bob, xpu):
    assert (
        bob.put(
            "/api/v1/projects/intel/torch-xpu-ops/expectations", "TestX.test_y,Fail\n", content_type="text/plain"
        ).status_code
        == 403
    )


def test_a_user_subscribes_and_sees_only_their_own_subscriptions(alice, bob, xpu):
    body = {
        "name": "xpu failures",
        "project": "intel/torch-xpu-ops",
        "events": ["new_failure", "recovery"],
        "channel": "slack",
        "target": "https://hooks.slack.com/services/T0/B0/x",
    }
    created = alice.post("/api/v1/subscriptions", body, format="json")
    assert created.status_code == 201, created.json()
    assert [s["name"] for s in alice.get("/api/v1/subscriptions").json()["results"]] == ["xpu failures"]
    assert bob.get("/api/v1/subscriptions").json()["results"] == []
    assert bob.get(f"/api/v1/subscriptions/{created.json()['id']}").status_code == 404
    assert alice.get(f"/api/v1/subscriptions/{created.json()['id']}/notifications").json()["results"] == []


def test_subscriptions_need_a_signed_in_user(api):
    assert api.get("/api/v1/subscriptions").status_code in (401, 403)


@pytest.mark.parametrize(
    "body, field",
    [
        ({"channel": "email", "target": "not-an-address"}, "target"),
        ({"channel": "webhook", "target": "ftp://x"}, "target"),
        ({"events": ["everything"]}, "events"),
        ({"test_pattern": "*"}, "test_pattern"),
    ],
)
def test_a_bad_subscription_is_a_400(alice, body, field):
    response = alice.post(
        "/api/v1/subscriptions",
        {"name": "s", "channel": "webhook", "target": "https://example.org/hook", **body},
        format="json",
    )
    assert response.status_code == 400 and field in response.json()["errors"]
    assert not Subscription.objects.exists()
