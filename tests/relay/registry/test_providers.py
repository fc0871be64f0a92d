"""config/ci_providers.yml (reference/relay.md §2.4): parsing the shapes the upstream file uses,
writing them back, and `providers_import` / `providers_export` against the registry."""

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from relay.models import Project
from relay.registry.providers import PipelineMapping, ProvidersError, parse_providers, render_providers
from tests.factories import ProjectFactory

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "ci_providers.yml"
SHIPPED = FIXTURE.read_text()
VLLM_KEY = "018b5ec5-5a2e-4b8c-9d61-0c3f1a7e2b10/018cdabc-7f41-4e0d-8a93-6b2d5c1e9f20"
ORG, PIPE = VLLM_KEY.split("/")
REDHAT_KEY = "01900000-aaaa-4bbb-8ccc-000000000001/01900000-aaaa-4bbb-8ccc-000000000002"
WINDOWS_KEY = "01900000-aaaa-4bbb-8ccc-000000000003/01900000-aaaa-4bbb-8ccc-000000000004"


def errors_of(text: str) -> list[str]:
    with pytest.raises(ProvidersError) as caught:
        parse_providers(text)
    return caught.value.errors


# --- parsing ---------------------------------------------------------------------------------------


def test_it_reads_the_new_section_and_normalises_claim_values_to_lists_of_strings():
    assert parse_providers(SHIPPED) == [
        PipelineMapping(VLLM_KEY, "vllm-project/vllm", {"build_branch": ["main", "nightly"]}),
        PipelineMapping(REDHAT_KEY, "TorchedHat/pytorch-redhat-ci", {}),
        PipelineMapping(
            WINDOWS_KEY,
            "NVIDIA/pytorch-windows-ci",
            {"build_branch": ["nightly"], "pipeline_slug": ["windows-nightly"]},
        ),
    ]


def test_it_reads_the_legacy_section_only_when_the_new_one_has_no_entries():
    legacy = (
        f"providers:\n  buildkite:\n    repo_map: {{}}\nbuildkite:\n  repo_map:\n    {VLLM_KEY}: vllm-project/vllm\n"
    )
    assert parse_providers(legacy) == [PipelineMapping(VLLM_KEY, "vllm-project/vllm")]


@pytest.mark.parametrize("text", ["", "providers:\n", "providers:\n  buildkite:\n    repo_map:\n"])
def test_it_reads_an_empty_file_or_section_as_no_mappings(text):
    assert parse_providers(text) == []


def test_it_names_every_bad_entry_at_once():
    text = (
        "providers:\n  buildkite:\n    repo_map:\n"
        "      vllm/ci: vllm-project/vllm\n"  # slugs, not UUIDs
        f"      {ORG}: a/b\n"  # no pipeline part
        f"      {ORG}/{ORG}: not-a-repo\n"
        f"      {PIPE}/{PIPE}:\n        repo: c/d\n        required_claims: {{build_branch: [main, true]}}\n"
        f"      {PIPE}/{ORG}:\n        repository: e/f\n"
        f"      {ORG}/{PIPE}: [g/h]\n"
    )
    errors = errors_of(text)
    assert len(errors) == 7
    assert (
        errors[0]
        == "providers.buildkite.repo_map entry 'vllm/ci': key must be <organization_id>/<pipeline_id>, both UUIDs (slugs can be renamed and re-claimed)"
    )
    assert "repo 'not-a-repo'" in errors[2]
    assert "required claim 'build_branch' must list text values" in errors[3]
    assert "unsupported field(s) 'repository'" in errors[4] and "repo None" in errors[5]
    assert "value must be owner/repo or a mapping" in errors[6]


def test_it_refuses_two_pipelines_for_one_repository_naming_both():
    text = f"providers:\n  buildkite:\n    repo_map:\n      {VLLM_KEY}: a/b\n      {REDHAT_KEY}: A/B\n"
    assert errors_of(text) == [
        f"entry {REDHAT_KEY!r}: A/B is already mapped from {VLLM_KEY!r}; one pipeline per repository"
    ]


def test_it_refuses_a_duplicate_key_that_yaml_loaders_would_silently_collapse():
    [error] = errors_of(f"providers:\n  buildkite:\n    repo_map:\n      {VLLM_KEY}: a/b\n      {VLLM_KEY}: c/d\n")
    assert "found duplicate key" in error


# --- writing ---------------------------------------------------------------------------------------


def test_it_writes_the_string_form_without_claims_and_the_mapping_form_with_them():
    text = render_providers(
        [
            PipelineMapping(VLLM_KEY, "vllm-project/vllm", {"build_branch": ["main", "nightly"]}),
            PipelineMapping(REDHAT_KEY, "o/r"),
        ]
    )
    assert text.splitlines()[1:] == [
        "providers:",
        "  buildkite:",
        "    repo_map:",
        f"      {VLLM_KEY}:",
        "        repo: vllm-project/vllm",
        "        required_claims:",
        "          build_branch: [main, nightly]",
        f"      {REDHAT_KEY}: o/r",
    ]


def test_it_round_trips_the_shipped_file():
    mappings = parse_providers(SHIPPED)
    assert parse_providers(render_providers(mappings)) == mappings


def test_it_quotes_claim_values_that_yaml_would_read_as_something_else():
    mappings = [PipelineMapping(VLLM_KEY, "a/b", {"build_branch": ["yes", "123", "null"]})]
    assert parse_providers(render_providers(mappings)) == mappings


# --- the commands ----------------------------------------------------------------------------------


def run(*args) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def registered(db):
    return [
        ProjectFactory(full_name=name)
        for name in ("vllm-project/vllm", "TorchedHat/pytorch-redhat-ci", "NVIDIA/pytorch-windows-ci")
    ]


def test_providers_import_maps_each_pipeline_to_its_project(registered):
    out, _ = run("providers_import", str(FIXTURE))
    assert "3 updated" in out
    vllm = Project.objects.get(full_name="vllm-project/vllm")
    assert (vllm.buildkite_pipeline, vllm.oidc_required_claims) == (VLLM_KEY, {"build_branch": ["main", "nightly"]})


def test_providers_import_then_export_round_trips_without_loss(registered, tmp_path):
    run("providers_import", str(FIXTURE))
    exported, _ = run("providers_export")
    assert parse_providers(exported) == parse_providers(SHIPPED)
    (tmp_path / "again.yml").write_text(exported)
    assert "0 updated, 0 cleared, 3 unchanged" in run("providers_import", str(tmp_path / "again.yml"))[0]


def test_providers_import_clears_a_pipeline_the_file_no_longer_lists(registered, tmp_path):
    run("providers_import", str(FIXTURE))
    (tmp_path / "fewer.yml").write_text(
        f"providers:\n  buildkite:\n    repo_map:\n      {VLLM_KEY}: vllm-project/vllm\n"
    )
    out, _ = run("providers_import", str(tmp_path / "fewer.yml"))
    assert "cleared: NVIDIA/pytorch-windows-ci" in out
    assert Project.objects.get(full_name="vllm-project/vllm").oidc_required_claims == {}
    assert Project.objects.get(full_name="NVIDIA/pytorch-windows-ci").buildkite_pipeline == ""


def test_providers_import_writes_nothing_and_names_every_unregistered_repository(db, tmp_path):
    ProjectFactory(full_name="vllm-project/vllm")
    with pytest.raises(CommandError, match="2 errors"):
        call_command("providers_import", str(FIXTURE), stdout=io.StringIO(), stderr=(err := io.StringIO()))
    assert "TorchedHat/pytorch-redhat-ci is not a registered project" in err.getvalue()
    assert "NVIDIA/pytorch-windows-ci is not a registered project" in err.getvalue()
    assert Project.objects.get().buildkite_pipeline == ""


def test_providers_import_refuses_a_bad_file_with_every_error_on_stderr(registered, tmp_path):
    (tmp_path / "bad.yml").write_text("providers:\n  buildkite:\n    repo_map:\n      slug/slug: a/b\n      x: y\n")
    with pytest.raises(CommandError, match=r"\(3 errors\); nothing was written"):
        call_command("providers_import", str(tmp_path / "bad.yml"), stdout=io.StringIO(), stderr=(err := io.StringIO()))
    assert "entry 'slug/slug': key must be" in err.getvalue() and "entry 'x': repo 'y'" in err.getvalue()
    assert set(Project.objects.values_list("buildkite_pipeline", flat=True)) == {""}


def test_an_imported_pipeline_authenticates_buildkite_callbacks_with_its_required_claims(registered, client, oidc):
    run("providers_import", str(FIXTURE))
    body = json.dumps({"delivery_id": "x", "workflow": {"status": "completed"}})

    def post(branch):
        token = oidc.mint(kind="buildkite", organization_id=ORG, pipeline_id=PIPE, build_branch=branch)
        return client.post(
            "/github/callback", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )

    assert post("contributor:fork").status_code == 403
    assert post("nightly").status_code == 400  # past identity: the body itself is what is wrong
