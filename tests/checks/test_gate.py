"""The merge gate: one `crcr/gate` check run per PR head, PATCHed as the L4 backends report, and
the same verdict from gate_verdict() for bots."""

import pytest

from relay.models import Dispatch, JobRun
from relay.results.gate import gate_verdict

from .conftest import HEAD, NEW_HEAD

pytestmark = pytest.mark.django_db

XPU, NPU, ROCM = "intel/torch-xpu-ops", "ascend/npu-ci", "rocm/pytorch-ci"


@pytest.fixture
def xpu(relay):
    return relay.backend(XPU, "L4")


def gate(relay, head: str = HEAD) -> dict:
    relay.drain()
    return relay.check_run("crcr/gate", head=head)


def state(run: dict) -> str:
    return run["conclusion"] or run["status"]


def test_the_gate_goes_pending_then_failure_then_success_after_a_passing_rerun(relay, xpu):
    relay.pr("opened")
    first = gate(relay)
    assert state(first) == "in_progress" and first["output"]["title"] == "Waiting for 1 of 1 L4 backend"
    relay.report(xpu, "in_progress")
    assert state(gate(relay)) == "in_progress"
    relay.report(xpu, "completed", "failure")
    failed = gate(relay)
    assert (state(failed), failed["output"]["title"]) == ("failure", f"Blocked: {XPU} failed")
    relay.report(xpu, "in_progress", attempt="2")
    assert state(gate(relay)) == "in_progress"
    relay.report(xpu, "completed", "success", attempt="2")
    passed = gate(relay)
    assert (state(passed), passed["id"]) == ("success", first["id"]), "one gate check run per head, updated in place"
    assert len(relay.check_runs("crcr/gate")) == 1


def test_the_gate_summary_is_a_table_of_the_l4_backends(relay, xpu):
    relay.backend(NPU, "L4")
    relay.pr("opened")
    relay.report(xpu, "completed", "failure")
    summary = gate(relay)["output"]["summary"]
    assert "| Backend | Result | Jobs | Why |" in summary
    assert f"| `{XPU}` | ❌ failure | 0/1 passed | `xpu-ci / build failure` |" in summary
    assert f"| `{NPU}` | ⏳ pending |" in summary


def test_a_pr_without_l4_backends_passes_the_gate(relay):
    relay.backend(ROCM, "L3", device="rocm")
    relay.pr("opened")
    run = gate(relay)
    assert (state(run), run["output"]["title"]) == ("success", "No L4 backend runs on this PR")


def test_each_new_head_gets_its_own_gate(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "failure")
    relay.pr("synchronize", head=NEW_HEAD)
    assert state(gate(relay, NEW_HEAD)) == "in_progress"
    assert state(relay.check_run("crcr/gate", head=HEAD)) == "failure"


def test_l3_failures_do_not_block(relay, xpu):
    rocm = relay.backend(ROCM, "L3", device="rocm")
    relay.pr("opened", labels=["ciflow/crcr/rocm"])
    relay.report(xpu, "completed", "success")
    relay.report(rocm, "completed", "failure")
    assert state(gate(relay)) == "success"


def test_cancelled_blocks_but_superseded_counts_nowhere(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "cancelled")
    assert gate_verdict(2)["state"] == "failure"
    relay.report(xpu, "in_progress", job="test")
    relay.pr("synchronize", head=NEW_HEAD)
    relay.sweep_results(hours_later=0)
    old = gate_verdict(2, HEAD)
    assert [j["state"] for j in old["backends"][0]["jobs"]] == ["cancelled", "superseded"]
    JobRun.objects.filter(job_name="build").update(ended_by="superseded")
    assert gate_verdict(2, HEAD)["state"] == "success"


def test_a_backend_that_never_starts_or_stalls_blocks_once_the_sweeper_says_so(relay, xpu):
    relay.pr("opened")
    assert gate_verdict(2)["state"] == "pending"
    relay.sweep_results(hours_later=7)
    verdict = gate_verdict(2)
    assert (verdict["state"], verdict["blocking"]) == ("failure", [XPU])
    assert verdict["backends"][0]["jobs"][0]["state"] == "never_started"
    assert state(gate(relay)) == "failure"


def test_a_stalled_job_times_out_and_blocks(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "in_progress")
    relay.sweep_results(hours_later=7)
    assert gate_verdict(2)["backends"][0]["jobs"][0]["state"] == "timed_out"
    assert state(gate(relay)) == "failure"


def test_a_backend_without_the_app_is_listed_but_does_not_block(relay, xpu):
    other = relay.backend(NPU, "L4")
    relay.pr("opened")
    relay.report(xpu, "completed", "success")
    Dispatch.objects.filter(project=other).update(state="not_installed")
    verdict = gate_verdict(2)
    assert verdict["state"] == "success"
    assert [(b["repo"], b["state"]) for b in verdict["backends"]] == [(NPU, "skipped"), (XPU, "success")]


def test_the_verdict_defaults_to_the_prs_latest_head_and_is_json_ready(relay, xpu):
    import json

    relay.pr("opened")
    relay.pr("synchronize", head=NEW_HEAD)
    verdict = gate_verdict(2)
    assert verdict["head_sha"] == NEW_HEAD and verdict["name"] == "crcr/gate"
    assert json.loads(json.dumps(verdict)) == verdict
    assert gate_verdict(999) == {**gate_verdict(999), "state": "success", "backends": []}


def test_a_reopen_that_dispatches_the_same_head_again_waits_for_the_new_run(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "success")
    assert gate_verdict(2)["state"] == "success"
    relay.pr("closed")
    relay.pr("reopened")
    assert gate_verdict(2)["state"] == "pending"
    relay.report(xpu, "completed", "success", run_id="4343")
    assert state(gate(relay)) == "success"


def test_a_nightly_only_l4_repo_neither_blocks_nor_holds_the_gate(relay, xpu):
    relay.backend("NVIDIA/pytorch-windows-ci", "L4", events=["nightly"])
    relay.pr("opened")
    relay.report(xpu, "completed", "success")
    passed = gate(relay)
    assert (state(passed), passed["output"]["title"]) == ("success", "All 1 L4 backend passed")
    assert [b["repo"] for b in gate_verdict(2)["backends"]] == [XPU]
