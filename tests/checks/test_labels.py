"""`ciflow/crcr/<device>` on an L3 backend's PR: added before dispatch, during the run or after it,
removed, and kept across a reopen."""

import pytest

from relay.models import Dispatch

from .conftest import HEAD, NEW_HEAD

pytestmark = pytest.mark.django_db

ROCM = "rocm/pytorch-ci"
LABEL = "ciflow/crcr/rocm"
BACKEND, JOB = f"crcr/{ROCM}", f"crcr/{ROCM}/xpu-ci/build"


@pytest.fixture
def rocm(relay):
    return relay.backend(ROCM, "L3", device="rocm")


def label(relay, action: str, labels=(), head: str = HEAD):
    return relay.pr(action, labels=labels, label=LABEL, head=head)


def names(relay) -> set[str]:
    return {r["name"] for r in relay.check_runs()}


def test_a_label_added_before_dispatch_shows_check_runs_from_the_next_dispatch(relay, rocm):
    label(relay, "labeled", labels=[LABEL])
    relay.drain()
    assert BACKEND not in names(relay), "nothing dispatched yet, nothing to show"
    relay.pr("synchronize", head=NEW_HEAD, labels=[LABEL])
    relay.drain()
    assert relay.check_run(BACKEND, head=NEW_HEAD)["status"] == "queued"


def test_a_label_added_during_the_run_backfills_the_running_job_which_then_completes_in_place(relay, rocm):
    relay.pr("opened")
    relay.report(rocm, "in_progress")
    relay.drain()
    assert BACKEND not in names(relay)
    label(relay, "labeled", labels=[LABEL])
    relay.drain()
    assert relay.check_run(BACKEND)["conclusion"] == "neutral"
    running = relay.check_run(JOB)
    assert running["status"] == "in_progress"
    relay.report(rocm, "completed", "success")
    relay.drain()
    done = relay.check_run(JOB)
    assert (done["id"], done["conclusion"]) == (running["id"], "success")


def test_a_label_added_after_the_run_backfills_the_finished_result(relay, rocm):
    relay.pr("opened")
    relay.report(rocm, "completed", "failure", test_results={"passed": 3, "failed": 1})
    label(relay, "labeled", labels=[LABEL])
    relay.drain()
    run = relay.check_run(JOB)
    assert (run["status"], run["conclusion"], run["output"]["title"]) == (
        "completed",
        "failure",
        "Failure: 1 of 4 tests failed",
    )


def test_removing_the_label_completes_open_check_runs_as_neutral_with_a_note(relay, rocm):
    relay.pr("opened", labels=[LABEL])
    relay.report(rocm, "completed", "failure", job="lint")
    relay.report(rocm, "in_progress")
    relay.drain()
    label(relay, "unlabeled", labels=[])
    relay.drain()
    running = relay.check_run(JOB)
    assert (running["conclusion"], running["output"]["title"]) == ("neutral", f"Not reported: {LABEL} removed")
    assert "Add the label again" in running["output"]["summary"]
    assert relay.check_run(f"crcr/{ROCM}/xpu-ci/lint")["conclusion"] == "failure", "finished results stay"
    relay.report(rocm, "completed", "failure")
    relay.drain()
    assert relay.check_run(JOB)["conclusion"] == "neutral", "no longer reported"


def test_adding_the_label_again_shows_the_current_results(relay, rocm):
    relay.pr("opened", labels=[LABEL])
    relay.report(rocm, "in_progress")
    label(relay, "unlabeled", labels=[])
    relay.report(rocm, "completed", "success")
    label(relay, "labeled", labels=[LABEL])
    relay.drain()
    assert relay.check_run(JOB)["conclusion"] == "success"


def test_a_reopened_pr_keeps_what_its_labels_say(relay, rocm):
    relay.pr("opened", labels=[LABEL])
    relay.pr("closed", labels=[LABEL])
    relay.pr("reopened", labels=[LABEL])
    relay.report(rocm, "in_progress")
    relay.drain()
    assert relay.check_run(JOB)["status"] == "in_progress"


def test_a_reopened_pr_whose_label_was_removed_while_closed_gets_none(relay, rocm):
    relay.pr("opened")
    relay.pr("closed")
    relay.pr("reopened")
    relay.report(rocm, "completed", "failure")
    relay.drain()
    assert not {n for n in names(relay) if n.startswith(f"crcr/{ROCM}")}


def test_a_label_for_another_device_changes_nothing(relay, rocm):
    relay.pr("opened", labels=["ciflow/crcr/xpu"])
    relay.report(rocm, "completed", "failure")
    relay.drain()
    assert names(relay) == {"crcr/gate"}


def test_a_nightly_only_l3_repo_gets_no_check_run_backfill_from_its_label(relay):
    relay.backend("intel/xpu-nightly", "L3", device="rocm", events=["nightly"])
    relay.pr("opened")
    label(relay, "labeled", labels=[LABEL])
    relay.drain()
    assert not any(name.startswith("crcr/intel/xpu-nightly") for name in names(relay))
    assert Dispatch.objects.filter(project__full_name="intel/xpu-nightly").count() == 0
