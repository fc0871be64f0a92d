"""Re-run requests from the upstream PR reach the downstream run, with its own token."""

import pytest

from relay.models import JobRun, RerunRequest, UpstreamWrite
from tests.conftest import fixture_payload

from .conftest import HEAD

pytestmark = pytest.mark.django_db

XPU, ROCM = "intel/torch-xpu-ops", "rocm/pytorch-ci"
JOB = f"crcr/{XPU}/xpu-ci/build"


@pytest.fixture
def xpu(relay):
    return relay.backend(XPU, "L4")


def rerequest_check_run(relay, run: dict, app_id: int = 1001) -> dict:
    payload = fixture_payload("check_run.rerequested")
    payload["check_run"].update(
        id=run["id"], name=run["name"], external_id=run["external_id"], head_sha=HEAD, pull_requests=[]
    )
    payload["check_run"]["app"]["id"] = app_id
    return relay.webhook("check_run", payload)


def rerequest_suite(relay, suite_id: int) -> dict:
    payload = fixture_payload("check_suite.rerequested")
    payload["check_suite"].update(id=suite_id, head_sha=HEAD)
    payload["check_suite"]["app"]["id"] = 1001
    return relay.webhook("check_suite", payload)


def test_rerunning_one_check_run_reruns_the_downstream_runs_failed_jobs(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "failure")
    relay.drain()
    assert rerequest_check_run(relay, relay.check_run(JOB))["status"] == "recorded"
    relay.drain()
    assert [(r["repo"], r["run_id"], r["kind"]) for r in relay.gh.reruns] == [(XPU, 4242, "failed")]
    [call] = relay.writes_to("POST", rf"/repos/{XPU}/actions/runs/4242/rerun-failed-jobs")
    assert (
        call.headers["authorization"]
        != relay.gh.requests("POST", r"/repos/pytorch/pytorch/check-runs")[0].headers["authorization"]
    ), "the downstream repo's own token"
    request = RerunRequest.objects.get()
    assert (request.project, request.run_id, request.kind, request.outcome) == (xpu, "4242", "failed", "requested")


def test_the_rerun_attempts_queue_time_is_measured_from_the_rerun_request(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "failure")
    relay.drain()
    rerequest_check_run(relay, relay.check_run(JOB))
    relay.drain()
    relay.report(xpu, "in_progress", attempt="2")
    assert JobRun.objects.get(run_attempt=2).queue_seconds is not None


def test_rerun_all_checks_reruns_every_distinct_downstream_run_once(relay, xpu):
    rocm = relay.backend(ROCM, "L3", device="rocm")
    relay.pr("opened", labels=["ciflow/crcr/rocm"])
    relay.report(xpu, "completed", "failure", job="build")
    relay.report(xpu, "completed", "success", job="test")
    relay.report(rocm, "completed", "failure", run_id="777")
    relay.drain()
    assert rerequest_suite(relay, relay.check_run(JOB)["check_suite"]["id"])["status"] == "recorded"
    relay.drain()
    assert sorted((r["repo"], r["run_id"], r["kind"]) for r in relay.gh.reruns) == [
        (XPU, 4242, "all"),
        (ROCM, 777, "all"),
    ]
    suite = UpstreamWrite.objects.get(kind="suite_rerun")
    assert suite.state == "sent" and "2 downstream run(s)" in suite.note


def test_already_running_is_a_normal_answer(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "failure")
    relay.drain()
    relay.gh.set_run_running(XPU, 4242, True)
    rerequest_check_run(relay, relay.check_run(JOB))
    relay.drain()
    write = UpstreamWrite.objects.get(kind="rerun")
    assert (write.state, write.note) == ("sent", f"{XPU} run 4242: already running")
    assert write.attempt_log.get().status_code == 403
    assert RerunRequest.objects.get().outcome == "already_running"
    assert relay.gh.reruns == []


def test_only_our_own_crcr_check_runs_of_l3_and_l4_backends_are_rerun(relay, xpu):
    l2 = relay.backend("apple/mps-ci", "L2")
    relay.pr("opened")
    relay.report(xpu, "completed", "failure")
    relay.drain()
    ours = relay.check_run(JOB)
    rerequest_check_run(relay, {"id": 1, "name": "lint", "external_id": "4242"})
    rerequest_check_run(relay, {"id": 2, "name": f"crcr/{l2.full_name}/ci/build", "external_id": "4242:2"})
    rerequest_check_run(relay, ours, app_id=999)
    rerequest_check_run(relay, relay.check_run("crcr/gate"))
    relay.drain()
    assert relay.gh.reruns == [] and not RerunRequest.objects.exists()


def test_a_check_run_from_before_the_mapping_is_found_by_its_name_and_external_id(relay, xpu):
    relay.pr("opened")
    rerequest_check_run(relay, {"id": 12345, "name": f"crcr/{XPU}/xpu-ci/build", "external_id": "5151:2"})
    relay.drain()
    assert [(r["repo"], r["run_id"]) for r in relay.gh.reruns] == [(XPU, 5151)]


def test_rerun_failed_checks_clicking_every_failed_check_of_one_run_asks_once(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "failure", job="build")
    relay.report(xpu, "completed", "failure", job="test")
    relay.drain()
    rerequest_check_run(relay, relay.check_run(JOB))
    rerequest_check_run(relay, relay.check_run(f"crcr/{XPU}/xpu-ci/test"))
    relay.drain()
    assert len(relay.gh.reruns) == 1
