"""/api/v1/allowlist: export for anyone, import for admins, all or nothing."""

import pytest

from relay.models import Project

pytestmark = pytest.mark.django_db
YAML = "L1:\n  - sgl-project/sglang\nL2:\n  - intel/torch-xpu-ops: a, b\nL3:\n  rocm:\n    ROCm/pytorch: [c]\nL4: []\n"


def test_carol_imports_an_allowlist_and_anyone_exports_it(carol, api):
    response = carol.put("/api/v1/allowlist", {"yaml": YAML, "reason": "sync"}, format="json")
    assert response.status_code == 200, response.json()
    assert sorted(response.json()["created"]) == ["ROCm/pytorch", "intel/torch-xpu-ops", "sgl-project/sglang"]
    exported = api.get("/api/v1/allowlist")
    assert exported["Content-Type"].startswith("application/yaml")
    assert "intel/torch-xpu-ops: a, b" in exported.content.decode()


def test_a_bad_allowlist_names_the_entry_and_imports_nothing(carol):
    response = carol.put(
        "/api/v1/allowlist", {"yaml": YAML + "  - 'not a repo'\n".replace("  -", "L5:\n  -")}, format="json"
    )
    bad = carol.put("/api/v1/allowlist", {"yaml": "L2:\n  - a/b\n  - A/B\n"}, format="json")
    assert bad.status_code == 400
    assert "A/B" in str(bad.json()["errors"]["yaml"])
    assert Project.objects.count() == (3 if response.status_code == 200 else 0)


def test_importing_needs_the_admin_scope(alice):
    assert alice.put("/api/v1/allowlist", {"yaml": YAML}, format="json").status_code == 403


def test_importing_needs_authentication(api):
    assert api.put("/api/v1/allowlist", {"yaml": YAML}, format="json").status_code == 401


def test_the_api_round_trips_per_entry_events_and_shows_them_on_the_project(carol, api):
    text = "L2:\n  - TorchedHat/pytorch-redhat-ci:\n      events: [nightly]\n      oncalls: [someone]\nL3:\n  xpu:\n    intel/torch-xpu-ops:\n      events: [pull_request]\n      oncalls: someone-else\n"
    assert carol.put("/api/v1/allowlist", {"yaml": text}, format="json").status_code == 200
    exported = api.get("/api/v1/allowlist").content.decode()
    assert "  - TorchedHat/pytorch-redhat-ci:\n      events: [nightly]\n      oncalls: [someone]\n" in exported
    assert "    intel/torch-xpu-ops:\n      events: [pull_request]\n      oncalls: [someone-else]\n" in exported
    assert api.get("/api/v1/projects/TorchedHat/pytorch-redhat-ci").json()["events"] == ["nightly"]


def test_a_maintainer_sets_a_projects_events_and_a_repeat_is_refused(alice):
    Project.objects.create(full_name="vllm-project/vllm", level="L2")
    ok = alice.patch("/api/v1/projects/vllm-project/vllm", {"events": ["nightly"]}, format="json")
    assert ok.status_code == 200 and ok.json()["events"] == ["nightly"], ok.json()
    bad = alice.patch("/api/v1/projects/vllm-project/vllm", {"events": ["nightly", "nightly"]}, format="json")
    assert bad.status_code == 400 and "listed once" in str(bad.json()), bad.json()
    assert alice.patch("/api/v1/projects/vllm-project/vllm", {"events": ["push"]}, format="json").status_code == 400
