"""The sandbox's enablement: OpenReg passing every path of the suite's slice in its JUnit, backends
at different stages sending counts per module on their test shards, ROCm skipping a module after
the lasting upstream break; read through the relay's own parser, writer and reads."""

import pytest

from devtools.standin import sandbox
from devtools.standin.sandbox import JobPlan, reference_junit
from devtools.standin.sandbox_enablement import PATH_OF, STAGES, SUITE
from relay.callbacks.body import module_counts_read
from relay.enablement.backend import skip_rises
from relay.enablement.counts import by_module
from relay.enablement.paths import path_of, rules
from relay.enablement.table import counted_commits, enablement_table
from relay.reference.junit import junit_parse
from tests.relay.enablement.scenario import backends, commit, job

pytestmark = pytest.mark.django_db


def shard_counts(repo: str, sha: str) -> dict:
    plan = JobPlan({"full_name": repo, "level": "L2"}, {"payload": {"after": sha}})
    counts = {}
    for number in (1, 2):
        body = plan.body(plan.job(f"test (default, {number}, 2)", "success"), "completed")
        counts.update(module_counts_read(body["workflow"].get("module_counts")))
    return counts


def test_the_sandboxs_plan_of_paths_is_what_the_shipped_rules_say():
    assert {module: path_of(module, rules()) for module in SUITE} == PATH_OF


def test_openreg_passes_every_module_of_the_slice():
    modules = by_module(junit_parse(reference_junit("ab" * 20)).modules)
    assert all(modules[module]["passed"] >= count for module, count in SUITE.items())


def test_backends_send_their_stage_on_their_shards_and_the_build_job_sends_none():
    sha = "cd" * 20
    counts = by_module(shard_counts("intel/torch-xpu-ops", sha))
    assert set(counts) == set(SUITE)
    assert counts["test_ops"]["passed"] > counts["inductor.test_torchinductor"]["passed"]
    plan = JobPlan({"full_name": "intel/torch-xpu-ops", "level": "L2"}, {"payload": {"after": sha}})
    assert "module_counts" not in plan.body(plan.job("build", "success"), "completed")["workflow"]
    assert shard_counts("vllm-project/vllm", sha) == {}


def test_rocm_skipping_test_nn_after_the_lasting_break_reads_since_that_commit(monkeypatch):
    reference, rocm = backends()
    rocm.full_name = "ROCm/pytorch"
    rocm.save()
    before, broke = commit(2), commit(1)
    monkeypatch.setattr(sandbox, "LASTING_BREAK_HEADS", {broke.sha})
    for c in (before, broke):
        job(rocm, c.sha, shard_counts("ROCm/pytorch", c.sha))
        job(reference, c.sha, junit_parse(reference_junit(c.sha)).modules)
    rises = skip_rises(rocm, counted_commits([rocm.pk], broke.landed_at)[rocm.pk])
    assert set(rises) == {"test_nn"} and rises["test_nn"].sha == broke.sha
    rows = {row.project.full_name: row for row in enablement_table().rows}
    cells = {cell.path: cell for cell in rows["ROCm/pytorch"].cells}
    assert cells["eager ops"].parity > 0.9 and cells["nn"].parity < 0.6
    assert all(cell.parity in (1.0, None) for cell in rows["pytorch/openreg-ci"].cells)


@pytest.mark.parametrize("repo", sorted(STAGES))
def test_every_staged_backend_is_registered_in_the_sandbox(repo):
    from devtools.sandbox_registry import SANDBOX_PROJECTS

    assert repo in {p["full_name"] for p in SANDBOX_PROJECTS}
