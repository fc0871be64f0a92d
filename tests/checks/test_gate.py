"""The merge gate: one `crcr/gate` check run per PR head, PATCHed as the L4 backends report, and
the same verdict from gate_verdict() for bots."""

import pytest

from relay.models import Dispatch, JobRun
from relay.results.gate import gate_verdict
from tests.crawl.crawler import gate_vs_verdict

from .conftest import HEAD, NEW_HEAD

pytestmark = pytest.mark.django_db

XPU, NPU, ROCM = "intel/torch-xpu-ops", "ascend/npu-ci", "rocm/pytorch-ci"


@pytest.fixture
def xpu(relay):
    return relay.backend(XPU, "L4", oncalls=["xpu-oncall"])


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


# --- the gate enforces the PR's verdict (issue 50 item 1; issue 52 item 4) -----------------------

BASE = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
"""The base commit of the pull_request fixture."""
ADDMM = {"name": "test_addmm_xpu_float32", "classname": "test_ops.TestCommonXPU", "file": "test/test_ops.py"}
SUM = {"name": "test_sum_xpu_float16", "classname": "test_reductions.TestReductionsXPU", "file": ""}


def trunk_fails(project, tests, job="test"):
    """The PR's base, a trunk commit, on which `project` already fails `tests` (as listed)."""
    from relay.models import FailedTest
    from tests.factories import JobRunFactory, UpstreamCommitFactory

    UpstreamCommitFactory(sha=BASE, is_trunk=True)
    run = JobRunFactory(
        project=project, head_sha=BASE, event_type="push", pr_number=None, job_name=job, conclusion="failure"
    )
    FailedTest.objects.bulk_create(FailedTest(job_run=run, **t) for t in tests)


def surfaces(relay, client) -> dict:
    """The gate as each surface gives it: the check run, the API, the PR page's gate box and its
    verdict table (whether the backend's row says it blocks)."""
    import re

    run = gate(relay)
    html = client.get("/pr/2").content.decode()
    box = re.search(r'<li data-repo="intel/torch-xpu-ops" data-gate-state="(\w+)">(.*?)</li>', html, re.S)
    row = re.search(r'data-repo="intel/torch-xpu-ops" data-level="L4" data-blocks="(\w+)">(.*?)</tr>', html, re.S)
    return {
        "check run": state(run),
        "api": client.get("/api/v1/prs/2/gate").json()["state"],
        "gate box": box.group(1),
        "verdict blocks": row.group(1) if row else None,
        "summary": run["output"]["summary"],
        "html": (box.group(2) if box else "") + (row.group(2) if row else ""),
        "contradictions": gate_vs_verdict(html),  # what the crawl checks on every PR page
        "oncall pinged": any("crcr-oncall:intel/torch-xpu-ops" in c["body"] for c in relay.gh.comments),
    }


def test_a_failure_already_failing_on_trunk_passes_the_gate_with_its_reason_on_every_surface(relay, xpu, client):
    trunk_fails(xpu, [ADDMM])
    relay.pr("opened")
    relay.report(xpu, "completed", "failure", job="test", failed_tests=[ADDMM])  # no counts, as the action allows
    seen = surfaces(relay, client)
    assert [seen[k] for k in ("check run", "api", "gate box", "verdict blocks")] == ["success"] * 3 + ["false"]
    reason = "test_ops.TestCommon.test_addmm_float32 already failing on trunk"
    assert reason in seen["summary"] and reason in seen["html"] and "does not block the merge" in seen["html"]
    assert seen["contradictions"] == [] and seen["oncall pinged"] is False
    relay.report(xpu, "completed", "failure", job="test", attempt="2", failed_tests=[ADDMM, SUM])
    seen = surfaces(relay, client)
    assert [seen[k] for k in ("check run", "api", "gate box", "verdict blocks")] == ["failure"] * 3 + ["true"]
    assert "blocks the merge" in seen["html"] and seen["contradictions"] == [] and seen["oncall pinged"] is True


def muted(project, tests):
    """The backend mutes each of `tests` (as its token would, one mute each)."""
    from datetime import timedelta

    from django.utils import timezone

    from relay.models import TestIdentity, TestMute
    from relay.policy.testids import test_id

    ids = TestIdentity.objects.ids_for({test_id(t["name"], t["classname"], t["file"]) for t in tests})
    until = timezone.now() + timedelta(days=7)
    TestMute.objects.bulk_create(
        TestMute(identity_id=pk, project=project, reason="r", owner="o", created_by="a", expires_at=until)
        for pk in ids.values()
    )


def test_a_job_counting_more_failures_than_it_lists_blocks_though_the_listed_one_is_muted(relay, xpu):
    muted(xpu, [ADDMM])
    relay.pr("opened")
    relay.report(xpu, "completed", "failure", job="test", failed_tests=[ADDMM], test_results={"failed": 40})
    verdict = gate_verdict(2)
    assert verdict["state"] == "failure" and "xpu-ci / test failure" in verdict["backends"][0]["reason"]


@pytest.mark.parametrize("listed, passes", [(999, True), (1000, False), (1001, False)])
@pytest.mark.parametrize("excused", [muted, trunk_fails])
def test_a_list_at_the_actions_cap_blocks_though_every_listed_failure_is_excused(relay, xpu, excused, listed, passes):
    """Sent without counts, as the action allows: 1,000 entries may be the action's cut, and more
    are the relay's (marked truncated)."""
    tests = [{**ADDMM, "name": f"test_addmm_{i}_xpu_float32"} for i in range(listed)]
    excused(xpu, tests)
    relay.pr("opened")
    relay.report(xpu, "completed", "failure", job="test", failed_tests=tests)
    assert gate_verdict(2)["state"] == ("success" if passes else "failure")


@pytest.mark.parametrize("conclusion", ["cancelled", "timed_out"])
def test_a_job_that_stopped_short_blocks_though_every_failure_it_listed_is_already_failing(relay, xpu, conclusion):
    """A cancelled or timed-out job did not run every test: as the pass rate never excuses it, the
    gate never clears it (a backend must not turn its gate green by cancelling)."""
    trunk_fails(xpu, [ADDMM])
    relay.pr("opened")
    relay.report(xpu, "completed", conclusion, job="test", failed_tests=[ADDMM], test_results={"failed": 1})
    assert gate_verdict(2)["state"] == "failure"


def test_a_fan_out_to_many_l4_backends_computes_the_gate_once_and_sends_what_the_last_dispatch_left(relay, monkeypatch):
    from relay.checks import gate as gate_bodies

    backends = [relay.backend(f"org{i}/accel-ci", "L4") for i in range(4)]
    computed = []
    body = gate_bodies.gate_body
    monkeypatch.setattr(gate_bodies, "gate_body", lambda *args: computed.append(args) or body(*args))
    relay.pr("opened")  # every dispatch sent refreshes the gate while its first write waits unsent
    assert len(computed) == 1, "one gate body before the write is sent, not one per L4 dispatch"
    run = gate(relay)
    assert run["output"]["title"] == f"Waiting for {len(backends)} of {len(backends)} L4 backends"
    assert len(relay.check_runs("crcr/gate")) == 1


def test_the_gate_asks_the_database_as_often_for_twenty_l4_backends_as_for_two(relay):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def reads_of_the_gate() -> int:
        with CaptureQueriesContext(connection) as reads:
            gate_verdict(2, HEAD)
        return len(reads.captured_queries)

    first = [relay.backend(f"org{i}/accel-ci", "L4") for i in range(2)]
    relay.pr("opened")
    relay.report(first[0], "completed", "success")
    with_two = reads_of_the_gate()
    later = [relay.backend(f"org{i}/accel-ci", "L4") for i in range(2, 20)]
    relay.pr("synchronize")  # the same head again: dispatched to the new backends too
    relay.report(later[0], "completed", "success")
    assert gate_verdict(2, HEAD)["title"] == "Waiting for 19 of 20 L4 backends"
    assert reads_of_the_gate() == with_two
