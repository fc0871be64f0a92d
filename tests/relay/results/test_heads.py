"""One answer to "which head of this PR counts" and "which commit does this prefix name", the
same on the PR page, the gate endpoint and the commit page and API."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hud.selectors_grid import pr_page
from relay.models import Level
from relay.results.cells import cells_for_commits
from relay.results.gate import gate_verdict
from relay.results.heads import pr_head, sha_resolve
from relay.stats.runkinds import Figure, jobs_counted
from tests.factories import DeliveryFactory, DispatchFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db

A, B, C = "a" * 40, "b" * 40, "c" * 40


def pushed(pr: int, sha: str, minutes_ago: int, action="synchronize"):
    return DeliveryFactory(
        pr_number=pr, head_sha=sha, action=action, received_at=timezone.now() - timedelta(minutes=minutes_ago)
    )


def test_the_newest_webhook_head_counts_even_when_an_older_sha_has_newer_results():
    l4 = ProjectFactory(level=Level.L4)
    pushed(7, A, 30)
    pushed(7, B, 20)
    pushed(7, A, 10)  # pushed back to A
    JobRunFactory(project=l4, pr_number=7, head_sha=B, event_type="pull_request", conclusion="failure")
    assert pr_head(7) == A


def test_without_a_webhook_the_newest_seen_head_counts():
    UpstreamCommitFactory(pr_number=8, is_trunk=False, sha=A, landed_at=timezone.now() - timedelta(hours=2))
    JobRunFactory(pr_number=8, head_sha=B, event_type="pull_request", created_at=timezone.now())
    assert pr_head(8) == B
    assert pr_head(9) == ""


def test_the_pr_page_and_the_gate_endpoint_judge_the_same_head(client):
    l4 = ProjectFactory(level=Level.L4)
    pushed(7, A, 30)
    pushed(7, B, 20)
    pushed(7, A, 10)
    JobRunFactory(project=l4, pr_number=7, head_sha=B, event_type="pull_request", created_at=timezone.now())
    page = pr_page(7)
    answer = client.get("/api/v1/prs/7/gate").json()
    assert page.heads[0].sha == page.gate["head_sha"] == answer["head_sha"] == A


def test_a_job_answering_a_prs_closing_dispatch_counts_neither_on_the_page_nor_at_the_gate():
    l4 = ProjectFactory(level=Level.L4)
    closing = DispatchFactory(project=l4, pr_number=7, head_sha=A, delivery=pushed(7, A, 5, action="closed"))
    JobRunFactory(
        project=l4, pr_number=7, head_sha=A, dispatch=closing, event_type="pull_request", conclusion="failure"
    )
    assert jobs_counted(Figure.CELLS, [A]).count() == 0
    assert cells_for_commits([A], [l4])[(A, l4.id)].verdicts == []
    assert gate_verdict(7, A)["backends"] == [] or gate_verdict(7, A)["backends"][0]["jobs"] == []


# --- a SHA prefix ----------------------------------------------------------------------------------


def test_a_unique_prefix_names_its_commit_everywhere(client):
    commit = UpstreamCommitFactory(sha="abc1234" + "0" * 33)
    assert sha_resolve("ABC1234").commit == commit
    assert client.get("/api/v1/commits/abc1234/").json()["sha"] == commit.sha
    assert client.get("/commit/abc1234").status_code == 200


def test_an_ambiguous_prefix_names_no_commit_anywhere_and_lists_the_candidates(client):
    first = UpstreamCommitFactory(sha="abc1234" + "0" * 33)
    second = UpstreamCommitFactory(sha="abc1234" + "f" * 33)
    match = sha_resolve("abc1234")
    assert match.sha is None and match.ambiguous
    assert client.get("/api/v1/commits/abc1234/").status_code == 404
    assert client.get("/api/v1/commits/abc1234/baseline").json()["detail"] == "SHA prefix is ambiguous"
    page = client.get("/commit/abc1234")
    assert page.status_code == 404
    html = page.content.decode()
    assert first.sha[:12] in html and second.sha[:12] in html


def test_a_full_sha_names_itself_even_when_nothing_is_recorded():
    match = sha_resolve(C)
    assert (match.sha, match.commit) == (C, None)
    assert sha_resolve("c" * 7).sha is None  # a prefix of nothing


# --- the PR's labels -------------------------------------------------------------------------------


def test_the_pr_page_lists_as_labelled_exactly_the_l3_backends_the_check_runs_follow():
    """Label events processed out of order: the newest webhook's labels win, in the one PR row
    that the page's chips, its L3 line and the check runs all read."""
    from datetime import timedelta

    from django.utils import timezone

    from relay.checks.labels import check_runs_wanted
    from relay.intake.commits import commits_record
    from relay.results.heads import pr_label_names

    xpu = ProjectFactory(level=Level.L3, device="xpu")
    npu = ProjectFactory(level=Level.L3, device="npu")
    now = timezone.now()

    def webhook(label, at):
        pr = {"number": 7, "title": "t", "labels": [{"name": label}], "head": {"sha": A}, "base": {}}
        commits_record("pull_request", {"action": "labeled", "pull_request": pr}, at)

    webhook("ciflow/crcr/XPU", now)
    webhook("ciflow/crcr/npu", now - timedelta(seconds=5))  # older, processed later
    DeliveryFactory(pr_number=7, head_sha=A, action="labeled")
    assert pr_label_names(7) == ["ciflow/crcr/XPU"]
    page = pr_page(7)
    assert page.l3_labelled == [p for p in (xpu, npu) if check_runs_wanted(p, 7)] == [xpu]


def test_a_prs_closing_dispatch_is_waited_on_nowhere():
    """The closing clean-up is sent, the head's real dispatch never reached the backend: the cell
    says not installed (as the gate counts it), never 'dispatched, not started'."""
    from relay.models import Dispatch
    from relay.policy.verdicts import State
    from relay.results.cells import cells_for_commits

    xpu = ProjectFactory(level=Level.L2)
    opened = DeliveryFactory(pr_number=7, head_sha=A, action="opened")
    closed = DeliveryFactory(pr_number=7, head_sha=A, action="closed")
    DispatchFactory(project=xpu, delivery=opened, head_sha=A, pr_number=7, state=Dispatch.State.NOT_INSTALLED)
    DispatchFactory(project=xpu, delivery=closed, head_sha=A, pr_number=7, state=Dispatch.State.SENT)
    assert cells_for_commits([A], [xpu])[(A, xpu.id)].state == State.NOT_INSTALLED
    assert list(Dispatch.objects.counted().values_list("delivery__action", flat=True)) == ["opened"]
