"""Known issues: occurrences recorded as results arrive and when an issue is made, the flag on a
resolved issue whose failures still occur, and issues an admin marked as not blocking the gate."""

import pytest

from relay.models import IssueOccurrence, KnownIssue
from relay.triage import issues
from relay.triage.issues import IssueError

from .conftest import ROCM_ADDMM, XPU_ADDMM, XPU_SUM, result

pytestmark = pytest.mark.django_db


def make_issue(**fields):
    data = {"title": "addmm OOM on XPU", "test_patterns": ["TestCommon.test_addmm*"], **fields}
    return issues.known_issue_create(data, by="alice", projects=data.pop("projects", []), may_unblock=True)


def test_it_records_where_a_known_issue_was_seen_once_per_failure(backends, trunk):
    issue = make_issue()
    run = result(backends["xpu"], trunk[0].sha, [XPU_ADDMM, XPU_SUM])
    assert [o.test_id for o in issues.occurrences_record(run.pk)] == ["test_ops.TestCommon.test_addmm_float32"]
    assert issues.occurrences_record(run.pk) == []
    assert IssueOccurrence.objects.get().issue == issue


def test_with_no_known_issue_a_failing_job_is_matched_without_reading_it_or_its_tests(
    backends, trunk, django_assert_num_queries
):
    run = result(backends["xpu"], trunk[0].sha, [XPU_ADDMM, XPU_SUM])
    with django_assert_num_queries(1):  # the issues; neither the job nor its tests
        assert issues.occurrences_record(run.pk) == []


def test_a_resolved_issue_still_matches_new_failures(backends, trunk):
    issue = make_issue()
    issues.known_issue_update(issue, {"state": KnownIssue.State.RESOLVED})
    run = result(backends["xpu"], trunk[1].sha, [XPU_ADDMM])
    assert [o.issue for o in issues.occurrences_record(run.pk)] == [issue]


def test_an_issue_limited_to_some_backends_ignores_the_others(backends, trunk):
    make_issue(all_backends=False, projects=[backends["xpu"]])
    run = result(backends["rocm"], trunk[0].sha, [ROCM_ADDMM])
    assert issues.occurrences_record(run.pk) == []


def test_a_message_matcher_needs_the_substring(backends, trunk):
    make_issue(message_contains="OUT_OF_DEVICE_MEMORY")
    assert issues.occurrences_record(result(backends["rocm"], trunk[0].sha, [ROCM_ADDMM]).pk) == []
    assert len(issues.occurrences_record(result(backends["xpu"], trunk[1].sha, [XPU_ADDMM]).pk)) == 1


def test_making_an_issue_finds_its_recent_occurrences(backends, trunk, django_capture_on_commit_callbacks):
    result(backends["xpu"], trunk[0].sha, [XPU_ADDMM])
    result(backends["rocm"], trunk[1].sha, [ROCM_ADDMM])
    with django_capture_on_commit_callbacks(execute=True):
        issue = make_issue()
    assert issue.occurrences.count() == 2


def test_an_issue_needs_a_matcher():
    with pytest.raises(IssueError):
        issues.known_issue_create({"title": "nothing to match"}, by="alice")


def test_a_resolved_issue_whose_failures_still_occur_is_flagged(backends, trunk):
    issue = make_issue()
    issues.occurrences_record(result(backends["xpu"], trunk[0].sha, [XPU_ADDMM]).pk)
    issues.known_issue_update(issue, {"state": "resolved"})
    assert issues.still_occurring(issue) == 0
    issues.occurrences_record(result(backends["xpu"], trunk[1].sha, [XPU_ADDMM]).pk)
    issue.refresh_from_db()
    assert issue.state == KnownIssue.State.RESOLVED and issues.still_occurring(issue) == 1


def test_a_failure_of_a_non_blocking_issue_does_not_block_the_gate_and_the_summary_says_so(backends):
    from relay.checks.gate import gate_summary
    from relay.results.gate import gate_verdict

    make_issue(blocks_gate=False)
    result(backends["xpu"], "e" * 40, [XPU_ADDMM], pr_number=4242)
    verdict = gate_verdict(4242, "e" * 40)
    assert verdict["state"] == "success"
    assert (
        "not blocking: ci / test (default, 1, 1) failed with test_ops.TestCommon.test_addmm_float32 known issue #"
        in verdict["backends"][0]["reason"]
    )
    assert "marked as not blocking the gate" in gate_summary(verdict)


def test_the_pr_page_gate_box_says_an_excused_failure_does_not_block(backends, client):
    from relay.results.gate import gate_shown

    issue = make_issue(blocks_gate=False)
    result(backends["xpu"], "e" * 40, [XPU_ADDMM], pr_number=4242)
    [backend] = gate_shown(4242, "e" * 40)["backends"]
    assert backend["state"] == "success" and backend["failing_jobs"] == []
    assert [j["not_blocking"] for j in backend["excused_jobs"]] == [
        f"test_ops.TestCommon.test_addmm_float32 known issue #{issue.pk}: {issue.title}"
    ]
    html = client.get("/pr/4242").content.decode()
    assert (
        "not blocking: ci / test (default, 1, 1) (failure, test_ops.TestCommon.test_addmm_float32 known issue #" in html
        and "blocking: ci" not in html.replace("not blocking: ci", "")
    )


def test_a_failure_beside_the_non_blocking_one_still_blocks(backends):
    from relay.results.gate import gate_verdict

    make_issue(blocks_gate=False)
    result(backends["xpu"], "e" * 40, [XPU_ADDMM, XPU_SUM], pr_number=4242)
    assert gate_verdict(4242, "e" * 40)["state"] == "failure"


def test_only_an_admin_may_mark_an_issue_as_not_blocking_the_gate_whichever_edge_asks():
    with pytest.raises(issues.UnblockRefused):
        issues.known_issue_create({"title": "t", "test_patterns": ["x*"], "blocks_gate": False}, by="bob")
    issue = make_issue()
    with pytest.raises(issues.UnblockRefused):
        issues.known_issue_update(issue, {"blocks_gate": False})
    assert issues.known_issue_update(issue, {"blocks_gate": False}, may_unblock=True).blocks_gate is False
    assert issues.known_issue_update(issue, {"blocks_gate": True}).blocks_gate is True  # blocking again needs no one
