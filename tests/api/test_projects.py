"""/api/v1/projects: the registry — works, needs auth, wrong scope, wrong method."""

import pytest

from relay.models import LevelChange, Project
from relay.registry import service as registry
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db


def test_anyone_can_list_projects_with_cursor_pagination(api):
    ProjectFactory.create_batch(3)
    body = api.get("/api/v1/projects/?page_size=2").json()
    assert len(body["results"]) == 2 and body["next"]
    assert len(api.get(body["next"]).json()["results"]) == 1


def test_it_filters_projects_by_level(api):
    ProjectFactory(level="L4")
    ProjectFactory(level="L2")
    assert [p["level"] for p in api.get("/api/v1/projects/?level=L4").json()["results"]] == ["L4"]


def test_a_project_is_found_by_its_full_name_case_insensitively(api):
    ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    body = api.get("/api/v1/projects/Intel/Torch-XPU-Ops/").json()
    assert body["full_name"] == "intel/torch-xpu-ops" and body["level_history"] == []


def test_a_write_needs_authentication(api):
    response = api.post("/api/v1/projects/", {"full_name": "a/b", "level": "L1"}, format="json")
    assert response.status_code == 401
    assert response.json()["code"] == "not_authenticated"


def test_a_write_needs_the_write_projects_scope(bob):
    response = bob.post("/api/v1/projects/", {"full_name": "a/b", "level": "L1"}, format="json")
    assert response.status_code == 403
    assert "write:projects" in response.json()["detail"]


def test_a_revoked_token_is_refused(alice):
    from django.utils import timezone

    from api.models import ApiToken

    ApiToken.objects.update(revoked_at=timezone.now())
    assert alice.get("/api/v1/projects/").status_code == 401


def test_alice_creates_a_project_and_its_level_is_audited(alice):
    response = alice.post(
        "/api/v1/projects/",
        {"full_name": "ROCm/pytorch", "level": "L3", "device": "rocm", "oncalls": ["rocm-ci"], "reason": "onboarding"},
        format="json",
    )
    assert response.status_code == 201, response.json()
    change = LevelChange.objects.get()
    assert (change.from_level, change.to_level, change.reason) == ("", "L3", "onboarding")
    assert change.changed_by.startswith("alice")


def test_it_refuses_a_bad_name_with_the_field_named(alice):
    response = alice.post("/api/v1/projects/", {"full_name": "not a repo", "level": "L1"}, format="json")
    assert response.status_code == 400
    assert "full_name" in response.json()["errors"]


def test_it_refuses_a_duplicate_name(alice):
    ProjectFactory(full_name="a/b")
    assert alice.post("/api/v1/projects/", {"full_name": "A/B", "level": "L1"}, format="json").status_code == 400


def test_alice_changes_a_level_with_a_reason(alice):
    ProjectFactory(full_name="intel/torch-xpu-ops", level="L2")
    response = alice.post(
        "/api/v1/projects/intel/torch-xpu-ops/level",
        {"level": "L4", "reason": "met readiness for 14 days"},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["level_history"][0]["to_level"] == "L4"
    assert LevelChange.objects.get().reason == "met readiness for 14 days"


def test_a_level_change_needs_a_reason(alice):
    ProjectFactory(full_name="a/b", level="L2")
    response = alice.post("/api/v1/projects/a/b/level", {"level": "L4"}, format="json")
    assert response.status_code == 400 and "reason" in response.json()["errors"]


def test_l3_without_a_device_is_refused_clearly(alice):
    ProjectFactory(full_name="a/b", level="L2")
    response = alice.post("/api/v1/projects/a/b/level", {"level": "L3", "reason": "x" * 5}, format="json")
    assert response.status_code == 400
    assert "device" in str(response.json())


def test_alice_updates_oncalls_and_deactivates(alice):
    ProjectFactory(full_name="a/b", level="L2")
    assert alice.patch("/api/v1/projects/a/b/", {"oncalls": ["x", "y"]}, format="json").json()["oncalls"] == ["x", "y"]
    assert alice.post("/api/v1/projects/a/b/deactivate").json()["active"] is False
    assert Project.objects.get().level == "L2"


def test_alice_may_send_oncalls_as_a_comma_separated_string_as_the_allowlist_writes_them(alice):
    ProjectFactory(full_name="a/b", level="L2")
    response = alice.patch("/api/v1/projects/a/b/", {"oncalls": "@x, y"}, format="json")
    assert response.status_code == 200 and response.json()["oncalls"] == ["x", "y"]
    assert Project.objects.get().oncalls == ["x", "y"]


def test_a_string_of_oncalls_already_stored_reads_as_a_list_everywhere(alice):
    ProjectFactory(full_name="a/b", level="L2", oncalls="x, @y")
    assert alice.get("/api/v1/projects/a/b/").json()["oncalls"] == ["x", "y"]
    assert "a/b: x, y" in registry.allowlist_export()


def test_alice_gets_a_400_for_oncalls_that_are_not_handles(alice):
    ProjectFactory(full_name="a/b", level="L2")
    response = alice.patch("/api/v1/projects/a/b/", {"oncalls": ["not a handle"]}, format="json")
    assert response.status_code == 400 and "not a GitHub handle" in str(response.json())
    assert alice.patch("/api/v1/projects/a/b/", {"oncalls": 5.5}, format="json").status_code == 400


def test_delete_is_not_an_allowed_method(alice):
    ProjectFactory(full_name="a/b")
    response = alice.delete("/api/v1/projects/a/b/")
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"


def test_a_missing_project_is_a_json_404(api):
    response = api.get("/api/v1/projects/no/such/")
    assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_reads_carry_an_etag_and_answer_304_when_unchanged(api):
    ProjectFactory()
    first = api.get("/api/v1/projects/")
    assert first["ETag"]
    again = api.get("/api/v1/projects/", HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304
    ProjectFactory()
    assert api.get("/api/v1/projects/", HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 200


def test_alice_declares_a_backend_s_variant_keys_and_gets_a_400_for_an_unknown_or_repeated_key(alice):
    ProjectFactory(full_name="a/b", level="L2")
    response = alice.patch("/api/v1/projects/a/b/", {"variant_keys": ["device", "os"]}, format="json")
    assert response.status_code == 200 and response.json()["variant_keys"] == ["device", "os"]
    for bad in (["gpu"], ["device", "device"], "device"):
        assert alice.patch("/api/v1/projects/a/b/", {"variant_keys": bad}, format="json").status_code == 400
    assert Project.objects.get().variant_keys == ["device", "os"]
