"""Oncall pings: one marked comment per (PR, downstream repo), edited on a new failing head and
on recovery, never two for concurrent failures."""

import pytest

from relay.checks import outbox
from relay.models import OncallComment, UpstreamWrite

from .conftest import HEAD, NEW_HEAD

pytestmark = pytest.mark.django_db

XPU = "intel/torch-xpu-ops"
MARKER = f"<!-- crcr-oncall:{XPU} -->"


@pytest.fixture
def xpu(relay):
    return relay.backend(XPU, "L4", oncalls=["xpu-oncall", "@intel-pt-ci"])


def comments(relay) -> list[dict]:
    return [c for c in relay.gh.comments if MARKER in c["body"]]


def test_a_failing_backend_pings_its_oncalls_in_one_marked_comment(relay, xpu):
    relay.pr("opened")
    relay.report(
        xpu,
        "completed",
        "failure",
        test_results={"passed": 5, "failed": 2},
        failed_tests=[{"name": "test_add", "classname": "TestOps"}, {"name": "test_mul"}],
    )
    relay.drain()
    [comment] = comments(relay)
    assert comment["issue_number"] == 2 and comment["body"].startswith(MARKER)
    assert "@xpu-oncall @intel-pt-ci please investigate" in comment["body"]
    assert (
        "| [`xpu-ci / build`](https://github.com/intel/torch-xpu-ops/actions/runs/4242) | failure | 1 | 2 of 7: `TestOps.test_add`<br>`test_mul` |"
        in comment["body"]
    )
    assert OncallComment.objects.get().comment_id == comment["id"]


def test_the_comment_shows_a_triage_verdict_as_advice_that_cannot_mention_anyone(relay, xpu):
    relay.pr("opened")
    verdict = {
        "schema_version": 1,
        "category": "upstream",
        "confidence": "medium",
        "summary": "broken by upstream, ping @pytorch/everyone",
        "suspected_upstream": {"pr": 2, "reason": "changed addmm"},
        "analyzer": {"name": "triage-bot", "version": "1.2"},
    }
    relay.report(xpu, "completed", "failure", triage_verdict=verdict)
    relay.drain()
    [comment] = comments(relay)
    assert (
        "- `xpu-ci / build`: Upstream · medium confidence · advisory — `broken by upstream, ping @pytorch/everyone`; "
        "suspected upstream change `#2` (this PR) · by `triage-bot 1.2`"
    ) in comment["body"]
    assert "| failure | 1 |" in comment["body"], "the verdict changes no result"


def test_a_passing_backend_pings_nobody(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "success")
    relay.drain()
    assert comments(relay) == []


def test_a_failure_on_a_new_head_edits_the_comment_and_pings_again(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "failure")
    relay.drain()
    [first] = comments(relay)
    relay.pr("synchronize", head=NEW_HEAD)
    relay.report(xpu, "in_progress", head=NEW_HEAD, run_id="5000")
    relay.drain()
    assert comments(relay)[0]["body"] == first["body"], "nothing new while the new head runs"
    relay.report(xpu, "completed", "failure", head=NEW_HEAD, run_id="5000")
    relay.drain()
    [again] = comments(relay)
    assert again["id"] == first["id"] and NEW_HEAD[:7] in again["body"] and "@xpu-oncall" in again["body"]
    assert relay.writes_to("PATCH", rf"/repos/pytorch/pytorch/issues/comments/{first['id']}")
    assert OncallComment.objects.get().pinged_head_sha == NEW_HEAD


def test_the_comment_says_so_when_the_backend_recovers(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "failure")
    relay.drain()
    relay.report(xpu, "completed", "success", attempt="2")
    relay.drain()
    [comment] = comments(relay)
    assert "recovered" in comment["body"] and "@xpu-oncall" not in comment["body"]
    assert OncallComment.objects.get().state == "recovered"


def test_concurrent_failures_of_two_jobs_yield_one_comment_listing_both(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "failure", job="build")
    relay.report(xpu, "completed", "failure", job="test")
    relay.drain()
    [comment] = comments(relay)
    assert "xpu-ci / build" in comment["body"] and "xpu-ci / test" in comment["body"]


def test_a_failure_recorded_while_the_comment_is_being_posted_edits_it_afterwards(relay, xpu):
    relay.pr("opened")
    relay.report(xpu, "completed", "failure", job="build")
    posting = UpstreamWrite.objects.get(kind="comment_create", state="pending")
    assert outbox.write_claim(posting.pk) is not None  # a worker is posting the comment now
    relay.report(xpu, "completed", "failure", job="test")
    waiting = UpstreamWrite.objects.get(target_key=posting.target_key, state="pending")
    assert outbox.write_claim(waiting.pk) is None, "never two writes to one comment at once"
    outbox.WRITES.record(posting, outbox._attempt(posting), posting.created_at, 1)
    relay.drain()
    [comment] = comments(relay)
    assert "xpu-ci / test" in comment["body"]
    assert len(relay.writes_to("POST", r"/repos/pytorch/pytorch/issues/2/comments")) == 1


def test_a_backend_without_oncalls_or_an_unlabelled_l3_pings_nobody(relay):
    quiet = relay.backend("ascend/npu-ci", "L4", oncalls=[])
    rocm = relay.backend("rocm/pytorch-ci", "L3", device="rocm", oncalls=["rocm-oncall"])
    relay.pr("opened")
    relay.report(quiet, "completed", "failure")
    relay.report(rocm, "completed", "failure")
    relay.drain()
    assert relay.gh.comments == [] and not OncallComment.objects.exists()


def test_two_backends_get_one_comment_each(relay, xpu):
    other = relay.backend("ascend/npu-ci", "L4", oncalls=["npu-oncall"])
    relay.pr("opened")
    relay.report(xpu, "completed", "failure")
    relay.report(other, "completed", "timed_out")
    relay.drain()
    assert len(relay.gh.comments) == 2


@pytest.mark.django_db(transaction=True)
def test_two_jobs_failing_at_the_same_moment_while_two_workers_send_yield_one_comment(relay, xpu):
    import json
    import threading
    import time

    from django.db import connection
    from django.test import Client

    from relay.dispatch.sending import dispatch_client_payload
    from relay.models import Dispatch
    from tests.conftest import action_body

    relay.pr("opened")
    payload = dispatch_client_payload(Dispatch.objects.get(project=xpu))
    tokens = {job: relay.oidc.mint(repository=XPU, repository_id=str(xpu.github_repo_id)) for job in ("build", "test")}
    barrier = threading.Barrier(4)

    def fail(job):
        body = json.dumps(action_body(payload, "completed", "failure", job=job))
        barrier.wait()
        Client().post(
            "/github/callback", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {tokens[job]}"
        )
        connection.close()

    def work():
        barrier.wait()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            for pk in UpstreamWrite.objects.filter(state__in=["pending", "retrying"]).values_list("pk", flat=True):
                outbox.write_send(pk)
        connection.close()

    threads = [
        threading.Thread(target=fail, args=("build",)),
        threading.Thread(target=fail, args=("test",)),
        threading.Thread(target=work),
        threading.Thread(target=work),
    ]
    [t.start() for t in threads]
    [t.join(timeout=60) for t in threads]
    relay.drain()
    [comment] = comments(relay)
    assert "xpu-ci / build" in comment["body"] and "xpu-ci / test" in comment["body"]
    assert len(relay.writes_to("POST", r"/repos/pytorch/pytorch/issues/2/comments")) == 1


def test_deciding_whether_to_ping_reads_the_heads_jobs_and_no_dispatch(relay, xpu, django_assert_num_queries):
    """Whom to ping is a question of the head's jobs and the PR's verdict on them: whether a
    dispatch is still unanswered (the gate's pending) changes nothing here."""
    from relay.checks.oncall import head_outcome

    relay.pr("opened")
    relay.report(xpu, "completed", "success")
    relay.drain()
    with django_assert_num_queries(2):  # the head's attempts, their failed tests
        assert head_outcome(xpu, 2, HEAD) == ("passing", [])
