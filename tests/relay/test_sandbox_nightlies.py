"""The sandbox's nightly reporters against a live relay: vLLM's Buildkite reporter, the nightly-only
repo and the probe, through the real callback endpoint, fill the nightly view."""

import json

import pytest

from devtools.sandbox_registry import seed_sandbox_registry
from devtools.standin.sandbox import Nightlies, Runners
from hud.selectors_backend import dashboard_build
from relay.models import JobRun, Project
from tests.conftest import UPSTREAM, UPSTREAM_ID

pytestmark = pytest.mark.django_db(transaction=True)
SHA = "5a" * 20


def test_one_sandbox_night_fills_the_nightly_view_with_one_row_per_sha(live_server, standin, oidc):
    standin.add_installation(installation_id=1, account="pytorch")
    standin.add_repo(UPSTREAM, repo_id=UPSTREAM_ID, installation_id=1)
    standin.add_commit(UPSTREAM, SHA, message="nightly head")
    seed_sandbox_registry()
    projects = json.loads(
        json.dumps(
            list(
                Project.objects.values(
                    "full_name",
                    "github_repo_id",
                    "level",
                    "ci_provider",
                    "is_reference",
                    "is_health_probe",
                    "buildkite_pipeline",
                    "events",
                )
            )
        )
    )
    runners = Runners(standin, live_server.url, projects)
    Nightlies(runners, projects).run(SHA)
    nightly = JobRun.objects.filter(event_type="nightly", head_sha=SHA)
    reporters = set(nightly.values_list("project__full_name", flat=True))
    assert reporters == {"vllm-project/vllm", "TorchedHat/pytorch-redhat-ci", "pytorch/crcr-test"}
    vllm = Project.objects.get(full_name="vllm-project/vllm")
    assert nightly.filter(project=vllm).count() == 6 and all(
        k.startswith("buildkite-4101-") for k in nightly.filter(project=vllm).values_list("delivery_key", flat=True)
    )
    [row] = dashboard_build(vllm, "7d", "nightly", 1, grouped=True).matrix.rows
    assert (row.sha, row.runs) == (SHA, 1)
    redhat = dashboard_build(
        Project.objects.get(full_name="TorchedHat/pytorch-redhat-ci"), "7d", "nightly", 1, grouped=True
    )
    assert [r.sha for r in redhat.matrix.rows] == [SHA]
