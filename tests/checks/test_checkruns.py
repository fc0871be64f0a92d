"""Check runs on the upstream PR, against the stand-in over HTTP: who gets them, what they show,
and that each is created once and then updated in place."""

import pytest

from relay.checks.checkruns import SUMMARY_LIMIT, TITLE_LIMIT, check_run_body
from relay.models import Delivery, Dispatch, JobRun, UpstreamCheckRun
from relay.results.gate import gate_verdict
from tests.conftest import fixture_payload

from .conftest import HEAD, NEW_HEAD

pytestmark = pytest.mark.django_db

XPU, ROCM, MPS = "intel/torch-xpu-ops", "rocm/pytorch-ci", "apple/mps-ci"
JOB = f"crcr/{XPU}/xpu-ci/build"


@pytest.fixture
def xpu(relay):
    return relay.backend(XPU, "L4", oncalls=[])


@pytest.fixture
def rocm(relay):
    return relay.backend(ROCM, "L3", device="rocm")


def test_an_l4_backend_shows_a_queued_check_run_from_the_moment_of_dispatch(relay, xpu):
    relay.pr("opened")
    relay.drain()
    backend = relay.check_run(f"crcr/{XPU}")
    assert (backend["status"], backend["conclusion"]) == ("queued", None)
    assert backend["output"]["title"] == "Dispatched, waiting for the first job"
    assert backend["external_id"] == f"-:2:{XPU}"


def test_a_job_check_run_is_created_in_progress_and_updated_in_place_when_it_completes(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "in_progress")
    relay.drain()
    running = relay.check_run(JOB)
    assert (running["status"], running["conclusion"]) == ("in_progress", None)
    assert running["external_id"] == f"4242:2:{XPU}"
    assert running["details_url"] == f"https://github.com/{XPU}/actions/runs/4242"
    failed = [
        {"name": "test_add", "classname": "TestOps", "message": "AssertionError: 1 != 2\nmore"},
        {"name": "test_mul"},
    ]
    relay.report(
        xpu, "completed", "failure", test_results={"passed": 10, "failed": 2, "skipped": 1}, failed_tests=failed
    )
    relay.drain()
    done = relay.check_run(JOB)
    assert done["id"] == running["id"], "updated in place, not a second check run"
    assert (done["status"], done["conclusion"]) == ("completed", "failure")
    assert done["output"]["title"] == "Failure: 2 of 13 tests failed"
    assert (
        "`TestOps.test_add`: `AssertionError: 1 != 2`" in done["output"]["summary"]
        and "`test_mul`" in done["output"]["summary"]
    )
    assert "| 10 | 2 | 1 | 13 |" in done["output"]["summary"]
    assert len(relay.writes_to("POST", r"/repos/pytorch/pytorch/check-runs")) == 3, (
        "backend, gate and job: one create each"
    )
    assert relay.writes_to("PATCH", rf"/repos/pytorch/pytorch/check-runs/{running['id']}")


def test_the_backend_check_run_completes_when_its_first_job_reports(relay, xpu):
    relay.pr("opened")
    relay.drain()
    relay.report(xpu, "in_progress")
    relay.drain()
    backend = relay.check_run(f"crcr/{XPU}")
    assert (backend["status"], backend["conclusion"], backend["output"]["title"]) == ("completed", "neutral", "Started")


def test_the_details_url_is_the_jobs_own_page_when_the_check_run_id_is_numeric(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "in_progress", check_run_id="987654321")
    relay.drain()
    assert relay.check_run(JOB)["details_url"] == f"https://github.com/{XPU}/actions/runs/4242/job/987654321"


def test_an_l3_backend_without_its_label_gets_no_check_runs(relay, rocm):
    relay.pr("opened")
    relay.report(rocm, "in_progress")
    relay.report(rocm, "completed", "failure")
    relay.drain()
    assert not [r for r in relay.check_runs() if r["name"].startswith(f"crcr/{ROCM}")]


def test_an_l3_backend_with_its_label_gets_check_runs(relay, rocm):
    relay.pr("opened", labels=["ciflow/crcr/ROCm"])
    relay.report(rocm, "in_progress")
    relay.drain()
    assert relay.check_run(f"crcr/{ROCM}")["conclusion"] == "neutral"
    assert relay.check_run(f"crcr/{ROCM}/xpu-ci/build")["status"] == "in_progress"


def test_l1_and_l2_backends_never_get_check_runs(relay):
    l2 = relay.backend(MPS, "L2")
    relay.pr("opened", labels=["ciflow/crcr/mps"])
    relay.report(l2, "completed", "failure")
    relay.drain()
    assert [r["name"] for r in relay.check_runs()] == ["crcr/gate"]


def test_a_fork_pr_finds_its_pr_through_the_external_id(relay, xpu):
    relay.pr("opened", fork=True)
    relay.report(xpu, "completed", "failure")
    relay.drain()
    run = relay.check_run(JOB)
    assert run["pull_requests"] == [], "GitHub links no PR to a fork's check run"
    assert run["external_id"] == f"4242:2:{XPU}"


def test_a_backend_that_never_starts_ends_timed_out_once_through_the_sweeper(relay, xpu):
    relay.pr("opened")
    relay.drain()
    relay.sweep_results(hours_later=7)
    relay.drain()
    relay.sweep_results(hours_later=8)
    relay.drain()
    [backend] = relay.check_runs(f"crcr/{XPU}")
    assert (backend["status"], backend["conclusion"], backend["output"]["title"]) == (
        "completed",
        "timed_out",
        "Never started",
    )
    assert relay.check_run("crcr/gate")["conclusion"] == "failure"


def test_a_stalled_job_times_out_in_place(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "in_progress")
    relay.drain()
    created = relay.check_run(JOB)["id"]
    relay.sweep_results(hours_later=7)
    relay.drain()
    [run] = relay.check_runs(JOB)
    assert (run["id"], run["conclusion"]) == (created, "timed_out")
    assert run["output"]["title"].startswith("Timed out")


def test_a_job_superseded_by_a_newer_head_completes_neutral_not_cancelled(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "in_progress")
    relay.pr("synchronize", head=NEW_HEAD)
    relay.sweep_results(hours_later=0)
    relay.drain()
    old = relay.check_run(JOB, head=HEAD)
    assert (old["conclusion"], old["output"]["title"]) == ("neutral", "Superseded by a newer head")
    assert relay.check_run(f"crcr/{XPU}", head=NEW_HEAD)["status"] == "queued"


def test_a_github_5xx_during_a_check_run_update_is_retried_and_ends_right(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "in_progress")
    relay.drain()
    run_id = relay.check_run(JOB)["id"]
    relay.gh.fail("PATCH", rf"/repos/pytorch/pytorch/check-runs/{run_id}", status=502)
    relay.report(xpu, "completed", "success")
    relay.drain()
    assert relay.check_run(JOB)["status"] == "in_progress", "the first PATCH failed and waits for its retry"
    write = UpstreamCheckRun.objects.get(github_id=run_id).writes.get(state="retrying")
    relay.make_due()
    relay.drain()
    assert (relay.check_run(JOB)["conclusion"]) == "success"
    write.refresh_from_db()
    assert write.state == "sent"
    assert list(write.attempt_log.values_list("outcome", "status_code", "method")) == [
        ("transient", 502, "PATCH"),
        ("sent", 200, "PATCH"),
    ]


def test_a_re_run_attempt_updates_the_same_check_run(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "failure")
    relay.drain()
    first = relay.check_run(JOB)
    relay.report(xpu, "in_progress", attempt="2")
    relay.drain()
    assert relay.check_run(JOB)["status"] == "in_progress"
    relay.report(xpu, "completed", "success", attempt="2")
    relay.drain()
    again = relay.check_run(JOB)
    assert (again["id"], again["conclusion"]) == (first["id"], "success")


def test_summary_and_title_stay_within_githubs_limits(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "in_progress", job="x" * 240)
    job = JobRun.objects.get()
    job.failed_tests.bulk_create(
        [job.failed_tests.model(job_run=job, name=f"test_{i}_" + "n" * 600, message="m" * 900) for i in range(200)]
    )
    JobRun.objects.filter(pk=job.pk).update(
        status="completed", conclusion="failure", tests_failed=200, tests_total=99999
    )
    row = UpstreamCheckRun.objects.get(kind="job")
    body = check_run_body(row)
    assert len(body["output"]["summary"]) <= SUMMARY_LIMIT and len(body["output"]["title"]) <= TITLE_LIMIT
    assert "more line(s) not shown" in body["output"]["summary"] or len(body["output"]["summary"]) < SUMMARY_LIMIT - 40
    relay.drain()
    assert relay.check_runs(row.name)[0]["conclusion"] == "failure"


def test_a_closed_pr_gets_no_new_check_runs(relay, xpu):
    relay.pr("opened")
    relay.drain()
    before = len(relay.check_runs())
    relay.pr("closed")
    relay.drain()
    assert len(relay.check_runs()) == before
    assert Dispatch.objects.filter(delivery__action="closed").exists()


def trunk_tag_push(relay, pr: int = 2, head: str = HEAD) -> Delivery:
    """pytorchbot's merge: the `ciflow/trunk/<pr>` tag pushed at the PR's head."""
    payload = {**fixture_payload("push"), "ref": f"refs/tags/ciflow/trunk/{pr}", "deleted": False, "after": head}
    delivery = Delivery.objects.get(guid=relay.webhook("push", payload)["delivery"])
    relay.send_dispatches(delivery)
    return delivery


def test_an_l4_merge_run_of_a_ciflow_trunk_tag_gets_its_check_run_on_the_prs_head(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "success", job="build")
    delivery = trunk_tag_push(relay)
    assert (delivery.pr_number, delivery.head_sha) == (2, HEAD)
    assert Dispatch.objects.get(delivery=delivery, project=xpu).pr_number == 2
    relay.report(xpu, "completed", "failure", job="trunk-test", run_id="5151")
    relay.drain()
    merge = relay.check_run(f"crcr/{XPU}/xpu-ci/trunk-test")
    assert (merge["conclusion"], merge["external_id"]) == ("failure", f"5151:2:{XPU}")
    assert JobRun.objects.get(job_name="trunk-test").event_type == "push"
    assert gate_verdict(2)["state"] == "failure", "the merge run's failure blocks the merge like the PR run's"


def test_a_merge_run_the_backend_never_starts_neither_fails_the_gate_nor_shows_a_check_run(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "success")
    trunk_tag_push(relay)
    relay.sweep_results(hours_later=7)
    relay.drain()
    assert JobRun.objects.filter(ended_by="never_started", event_type="push", pr_number=2).exists()
    assert gate_verdict(2)["state"] == "success"
    assert {r["name"] for r in relay.check_runs()} == {f"crcr/{XPU}", JOB, "crcr/gate"}
