from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from devtools.sandbox_registry import SANDBOX_PROJECTS, seed_sandbox_registry
from relay.models import CIProvider, HardwareKind, LevelChange, Project
from relay.registry import service as registry
from relay.registry.allowlist import AllowlistError, parse_allowlist
from relay.registry.service import (
    allowlist_export,
    allowlist_import,
    project_create,
    project_set_level,
)
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db

SAMPLE = (Path(__file__).resolve().parents[2] / "fixtures" / "allowlist.yml").read_text()
MISSION_SYSTEMS = {
    "intel/torch-xpu-ops",
    "ROCm/pytorch",
    "pytorch-mps/mps-ci",
    "quic/ai-engine-direct-torch",
    "vllm-project/vllm",
    "sgl-project/sglang",
    "huggingface/transformers",
}


def project(name: str) -> Project:
    return Project.objects.get(full_name__iexact=name)


# --- single projects -----------------------------------------------------------------------------


def test_it_records_the_initial_level_when_a_project_is_created():
    created = project_create("intel/torch-xpu-ops", "L4", by="alice", reason="onboarding", display_name="Intel XPU")
    change = created.level_changes.get()
    assert (change.from_level, change.to_level, change.changed_by, change.reason) == ("", "L4", "alice", "onboarding")


def test_it_refuses_to_create_a_project_with_a_bad_name_or_an_l3_without_device():
    with pytest.raises(ValidationError):
        project_create("not-a-repo", "L2", by="alice")
    with pytest.raises(ValidationError):
        project_create("a/b", "L3", by="alice")
    assert not Project.objects.exists()


def test_it_refuses_to_create_a_project_that_differs_only_in_case_from_another():
    project_create("Intel/Torch-XPU-Ops", "L2", by="alice")
    with pytest.raises(ValidationError):
        project_create("intel/torch-xpu-ops", "L2", by="bob")


def test_it_audits_a_level_change_with_who_why_and_from_what():
    p = ProjectFactory(level="L2")
    change = project_set_level(p, "L3", by="alice", reason="ready for check runs", device="xpu")
    p.refresh_from_db()
    assert (p.level, p.device) == ("L3", "xpu")
    assert (change.from_level, change.to_level, change.changed_by, change.reason) == (
        "L2",
        "L3",
        "alice",
        "ready for check runs",
    )


def test_it_writes_no_audit_row_when_the_level_is_unchanged():
    p = ProjectFactory(level="L2")
    assert project_set_level(p, "L2", by="alice", reason="no-op") is None
    assert not LevelChange.objects.exists()


def test_it_takes_the_stored_level_as_the_level_changed_from():
    p = ProjectFactory(level="L2")
    p.level = "L1"  # a stale or edited copy
    change = project_set_level(p, "L4", by="alice", reason="promote")
    assert change.from_level == "L2"


def test_it_refuses_a_move_to_l3_without_a_device():
    p = ProjectFactory(level="L2")
    with pytest.raises(ValidationError):
        project_set_level(p, "L3", by="alice", reason="oops")
    p.refresh_from_db()
    assert p.level == "L2"


# --- import --------------------------------------------------------------------------------------


def test_it_creates_every_project_of_the_file_with_level_device_oncalls_and_position():
    result = allowlist_import(SAMPLE, by="ops")
    assert len(result.created) == 11 and not (result.updated or result.deactivated or result.unchanged)
    xpu = project("intel/torch-xpu-ops")
    assert (xpu.level, xpu.device, xpu.oncalls, xpu.position) == ("L3", "xpu", ["chuanqi129", "xpu-oncall"], 0)
    assert project("quic/ai-engine-direct-torch").position == 2


def test_it_audits_the_initial_level_of_every_imported_project():
    allowlist_import(SAMPLE, by="ops", reason="initial import")
    assert LevelChange.objects.count() == 11
    assert set(LevelChange.objects.values_list("from_level", "changed_by", "reason")) == {("", "ops", "initial import")}


def test_it_updates_a_level_through_an_audited_change_and_keeps_the_rows_other_fields():
    ProjectFactory(
        full_name="ROCm/pytorch", level="L2", github_repo_id=42, display_name="AMD ROCm", hardware_kind="gpu"
    )
    result = allowlist_import(SAMPLE, by="ops", reason="promote ROCm")
    rocm = project("ROCm/pytorch")
    assert result.updated == ["ROCm/pytorch"]
    assert (rocm.level, rocm.oncalls, rocm.github_repo_id, rocm.display_name) == (
        "L4",
        ["rocm-ci-oncall"],
        42,
        "AMD ROCm",
    )
    change = rocm.level_changes.get()
    assert (change.from_level, change.to_level, change.changed_by, change.reason) == ("L2", "L4", "ops", "promote ROCm")


def test_it_matches_existing_projects_case_insensitively_and_adopts_the_files_spelling():
    ProjectFactory(full_name="rocm/PyTorch", level="L4", oncalls=["rocm-ci-oncall"])
    result = allowlist_import(SAMPLE, by="ops")
    assert result.updated == ["ROCm/pytorch"]
    assert Project.objects.filter(full_name__iexact="rocm/pytorch").get().full_name == "ROCm/pytorch"


def test_it_moves_a_project_out_of_l3_and_clears_its_device():
    ProjectFactory(full_name="ROCm/pytorch", level="L3", device="rocm")
    allowlist_import(SAMPLE, by="ops")
    assert (project("ROCm/pytorch").level, project("ROCm/pytorch").device) == ("L4", "")


def test_it_deactivates_registered_projects_absent_from_the_file_without_a_level_change():
    gone = ProjectFactory(full_name="retired/backend", level="L3", device="npu")
    result = allowlist_import(SAMPLE, by="ops")
    gone.refresh_from_db()
    assert result.deactivated == ["retired/backend"]
    assert (gone.active, gone.level, gone.device) == (False, "L3", "npu")
    assert not gone.level_changes.exists()


def test_it_leaves_absent_reference_and_probe_projects_untouched():
    reference = ProjectFactory(full_name="pytorch/openreg-ci", level="L2", is_reference=True, oncalls=["x"])
    probe = ProjectFactory(full_name="pytorch/crcr-health-probe", level="L2", is_health_probe=True)
    result = allowlist_import(SAMPLE, by="ops")
    assert sorted(result.kept) == ["pytorch/crcr-health-probe", "pytorch/openreg-ci"]
    for before in (reference, probe):
        after = Project.objects.get(pk=before.pk)
        assert (after.active, after.level, after.oncalls, after.updated_at) == (
            True,
            "L2",
            before.oncalls,
            before.updated_at,
        )


def test_it_reactivates_a_project_that_reappears():
    ProjectFactory(full_name="pytorch/ao", level="L1", active=False)
    result = allowlist_import(SAMPLE, by="ops")
    assert "pytorch/ao" in result.updated
    assert project("pytorch/ao").active


def test_it_reports_everything_unchanged_and_writes_nothing_on_a_second_identical_import():
    allowlist_import(SAMPLE, by="ops")
    audit_rows = LevelChange.objects.count()
    result = allowlist_import(SAMPLE, by="ops")
    assert len(result.unchanged) == 11 and not (result.created or result.updated or result.deactivated)
    assert LevelChange.objects.count() == audit_rows


def test_it_writes_nothing_when_the_file_has_any_error():
    kept = ProjectFactory(full_name="retired/backend", level="L2")
    with pytest.raises(AllowlistError):
        allowlist_import(SAMPLE + "  - not-a-repo\n", by="ops")
    assert list(Project.objects.values_list("full_name", "active")) == [(kept.full_name, True)]
    assert not LevelChange.objects.exists()


def test_it_rolls_back_every_write_when_one_fails_midway(monkeypatch):
    real_create, calls = registry.project_create, []

    def failing_create(*args, **kwargs):
        calls.append(args)
        if len(calls) == 5:
            raise RuntimeError("database went away")
        return real_create(*args, **kwargs)

    monkeypatch.setattr(registry, "project_create", failing_create)
    with pytest.raises(RuntimeError):
        allowlist_import(SAMPLE, by="ops")
    assert not Project.objects.exists() and not LevelChange.objects.exists()


# --- export --------------------------------------------------------------------------------------


def test_its_export_reads_back_exactly_as_the_imported_file():
    allowlist_import(SAMPLE, by="ops")
    assert parse_allowlist(allowlist_export()) == parse_allowlist(SAMPLE)


def test_it_exports_a_registry_reimported_from_its_own_export_unchanged():
    allowlist_import(SAMPLE, by="ops")
    exported = allowlist_export()
    result = allowlist_import(exported, by="ops")
    assert len(result.unchanged) == 11 and allowlist_export() == exported


def test_it_exports_active_reference_and_probe_projects_but_no_inactive_ones():
    ProjectFactory(full_name="pytorch/openreg-ci", level="L2", is_reference=True)
    ProjectFactory(full_name="retired/backend", level="L2", active=False)
    names = [e.full_name for e in parse_allowlist(allowlist_export())]
    assert names == ["pytorch/openreg-ci"]


def test_it_exports_an_empty_registry_as_four_empty_levels():
    assert parse_allowlist(allowlist_export()) == []
    assert "L3: {}" in allowlist_export()


# --- sandbox seed --------------------------------------------------------------------------------


def test_the_seed_covers_the_seven_mission_systems_the_reference_and_the_probe():
    projects = seed_sandbox_registry()
    assert {p.full_name for p in projects} >= MISSION_SYSTEMS
    assert len(projects) == len(SANDBOX_PROJECTS) == 12 and all(p.display_name and p.github_repo_id for p in projects)
    [reference] = [p for p in projects if p.is_reference]
    [probe] = [p for p in projects if p.is_health_probe]
    assert (reference.hardware_kind, probe.hardware_kind, probe.level) == (
        HardwareKind.REFERENCE,
        HardwareKind.PROBE,
        "L4",  # its label-gated L4 check counts in the gate
    )
    assert project("vllm-project/vllm").ci_provider == CIProvider.BUILDKITE


def test_the_seed_gives_every_l3_project_a_device_and_mixes_levels():
    projects = seed_sandbox_registry()
    assert {p.level for p in projects} == {"L1", "L2", "L3", "L4"}
    assert all(p.device for p in projects if p.level == "L3")


def test_the_seed_is_idempotent_and_audited_as_the_sandbox_seed():
    seed_sandbox_registry()
    snapshot = list(Project.objects.order_by("pk").values())
    assert set(LevelChange.objects.values_list("changed_by", flat=True)) == {"sandbox-seed"}
    audit_rows = LevelChange.objects.count()
    seed_sandbox_registry()
    assert list(Project.objects.order_by("pk").values()) == snapshot
    assert LevelChange.objects.count() == audit_rows == len(SANDBOX_PROJECTS)


def test_the_seed_restores_a_changed_level_with_an_audit_row():
    seed_sandbox_registry()
    project_set_level(project("ROCm/pytorch"), "L1", by="alice", reason="experiment")
    seed_sandbox_registry()
    rocm = project("ROCm/pytorch")
    assert (rocm.level, rocm.device) == ("L3", "rocm")
    assert rocm.level_changes.first().changed_by == "sandbox-seed"


def test_the_seeded_registry_exports_and_reimports_without_change():
    seed_sandbox_registry()
    result = allowlist_import(allowlist_export(), by="ops")
    assert len(result.unchanged) == len(SANDBOX_PROJECTS)


def test_an_allowlist_writing_an_installed_repo_in_lower_case_keeps_one_row_spelled_as_github_does():
    """Upstream's first allowlist wrote `ascend/pytorch`; GitHub (and the registry) say `Ascend/pytorch`."""
    from relay.models import Installation, InstalledRepo

    installation = Installation.objects.create(installation_id=7, account_login="Ascend")
    InstalledRepo.objects.create(installation=installation, full_name="Ascend/pytorch", repo_id=11)
    project_create("Ascend/pytorch", "L2", by="test")
    result = allowlist_import("L2:\n  - ascend/pytorch\n", by="test")
    assert result.unchanged == ["ascend/pytorch"] and not result.created
    assert list(Project.objects.values_list("full_name", flat=True)) == ["Ascend/pytorch"]


def test_a_new_repo_is_stored_as_github_spells_it_once_an_installation_listed_it():
    from relay.models import Installation, InstalledRepo

    installation = Installation.objects.create(installation_id=7, account_login="Ascend")
    InstalledRepo.objects.create(installation=installation, full_name="Ascend/pytorch", repo_id=11)
    allowlist_import("L2:\n  - ASCEND/PyTorch\n", by="test")
    assert list(Project.objects.values_list("full_name", flat=True)) == ["Ascend/pytorch"]
