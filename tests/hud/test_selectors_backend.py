"""One backend's dashboard: shard grouping, the SHA × job matrix, a cell's drill-down."""

from datetime import timedelta

import pytest
from django.utils import timezone

from hud.selectors_backend import (
    backend_find,
    cell_detail,
    dashboard_build,
    environment_latest,
    heads_in_window,
    matrix_build,
    run_url,
    shard_groups,
    shard_of,
)
from relay.models import FailedTest, LevelChange, UpstreamCommit
from relay.policy.verdicts import State
from tests.hud.test_selectors_summary import NOW, job, project  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]
SINCE = NOW - timedelta(days=7)


def matrix_of(backend, page: int = 1, grouped: bool = True):
    return matrix_build(backend, heads_in_window(backend, "pr", SINCE), "pr", page, grouped)


def test_it_reads_dash_underscore_and_parenthesised_shard_suffixes():
    assert shard_of("test-2") == ("test", 2)
    assert shard_of("test_3") == ("test", 3)
    assert shard_of("test (2, 4)") == ("test", 2)
    assert shard_of("test (default, 2, 5, linux.4xlarge)") == ("test (default, linux.4xlarge)", 2)
    assert shard_of("build") is None and shard_of("test (default)") is None


def test_it_groups_only_families_that_start_at_shard_one():
    groups = shard_groups(["test-1", "test-2", "cuda-11", "cuda-12", "lint"])
    assert groups == {"test-1": "test", "test-2": "test"}


def test_it_finds_a_backend_whatever_the_case():
    backend = project("Intel/Torch-XPU-Ops")
    assert backend_find("intel", "torch-xpu-ops") == backend
    assert backend_find("intel", "unknown") is None


def test_it_builds_one_row_per_head_sha_newest_first():
    backend = project()
    job(backend, sha="a" * 40, at=NOW - timedelta(hours=5))
    job(backend, sha="b" * 40, at=NOW - timedelta(hours=1), pr_number=13)
    matrix = matrix_of(backend)
    assert [(row.sha[0], row.pr_number) for row in matrix.rows] == [("b", 13), ("a", 12)]


def test_it_collapses_a_shard_group_to_its_worst_member_and_splits_it_on_request():
    backend = project()
    for name, conclusion in (("test-1", "success"), ("test-2", "failure"), ("test-3", "success"), ("lint", "success")):
        job(backend, conclusion, name=name)
    grouped = matrix_of(backend)
    assert [(c.title, len(c.members)) for c in grouped.columns] == [("lint", 1), ("test", 3)]
    assert [cell.state for cell in grouped.rows[0].cells] == [State.SUCCESS, State.FAILURE]
    assert len(matrix_of(backend, grouped=False).columns) == 4


def test_it_shows_the_latest_attempt_and_marks_a_retried_pass_flaky():
    backend = project()
    job(backend, "failure", attempt=1, at=NOW - timedelta(hours=3))
    job(backend, "success", attempt=2, at=NOW - timedelta(hours=2))
    assert matrix_of(backend).rows[0].cells[0].glyph == "R"  # passed on retry


def test_it_pages_heads_fifty_at_a_time():
    backend = project()
    for i in range(51):
        job(backend, sha=f"{i:040x}", at=NOW - timedelta(minutes=i + 1))
    first, second = (matrix_of(backend, page) for page in (1, 2))
    assert (len(first.rows), first.has_next, len(second.rows), second.has_next) == (50, True, 1, False)


def test_it_drills_into_a_cell_with_every_attempt_and_the_failed_tests():
    backend = project()
    UpstreamCommit.objects.create(sha="a" * 40, title="Fix the thing", pr_number=12)
    job(backend, "failure", attempt=1, at=NOW - timedelta(hours=3))
    latest = job(
        backend,
        "failure",
        attempt=2,
        at=NOW - timedelta(hours=2),
        workflow_url="https://github.com/o/r/actions/runs/5",
        check_run_id="99",
    )
    FailedTest.objects.create(job_run=latest, name="test_add", classname="TestOps", message="boom")
    detail = cell_detail(backend, "pr", "a" * 40, "build", grouped=True)
    member = detail.members[0]
    assert (detail.commit.title, detail.pr_url.endswith("/pull/12")) == ("Fix the thing", True)
    assert [a.job.run_attempt for a in member.attempts] == [2, 1]
    assert member.attempts[0].url == "https://github.com/o/r/actions/runs/5/job/99"
    assert [t.name for t in member.failed_tests] == ["test_add"]


def test_a_drill_down_lists_attempts_newest_first_by_attempt_number_not_arrival():
    backend = project()
    job(backend, "success", attempt=2, at=NOW - timedelta(hours=3))
    job(backend, "failure", attempt=1, at=NOW - timedelta(hours=2))  # a late callback of attempt 1
    member = cell_detail(backend, "pr", "a" * 40, "build", grouped=True).members[0]
    assert [a.job.run_attempt for a in member.attempts] == [2, 1] and member.state == State.FLAKY


def test_it_answers_none_for_a_cell_that_is_not_on_the_matrix():
    assert cell_detail(project(), "pr", "a" * 40, "nope", grouped=True) is None


def test_it_links_providers_other_than_github_to_the_run_they_reported():
    backend = project(ci_provider="buildkite")
    built = job(backend, workflow_url="https://buildkite.com/org/p/builds/7", check_run_id="12")
    assert run_url(built, backend) == "https://buildkite.com/org/p/builds/7"


def test_it_shows_the_latest_environment_the_backend_reported():
    backend = project()
    job(backend, name="old", at=NOW - timedelta(hours=5), environment={"sdk": "1"})
    job(backend, name="new", at=NOW - timedelta(hours=1), environment={"sdk": "2", "device": "xpu"})
    job(backend, name="newest", at=NOW - timedelta(minutes=5))
    environment = environment_latest(backend)
    assert (environment.values, environment.job_label) == ({"device": "xpu", "sdk": "2"}, "new")


def test_it_builds_the_dashboard_with_cards_and_readiness():
    backend = project(level="L3")
    LevelChange.objects.create(
        project=backend, to_level="L3", changed_by="t", changed_at=timezone.now() - timedelta(days=40)
    )
    job(backend, "success")
    dash = dashboard_build(backend, "7d", "pr", 1, grouped=True, now=NOW)
    cards = {card.title: card for card in dash.cards}
    assert cards["Pass rate"].value == "100.0 %" and cards["Head SHAs tested"].value == "1"
    assert dash.readiness.outlook in ("holds", "at_risk")
    assert [row.sha for row in dash.matrix.rows] == ["a" * 40]


def test_a_drill_down_says_where_imported_per_test_results_came_from():
    backend = project()
    job(
        backend,
        "failure",
        ended_by="imported",
        tests_source="log",
        tests_passed=2,
        tests_failed=5,
        tests_skipped=2,
        tests_total=9,
    )
    member = cell_detail(backend, "pr", "a" * 40, "build", grouped=True).members[0]
    assert member.tests_text == "2 passed · 5 failed · 2 skipped of 9 · via job log"


def test_a_callbacks_own_counts_name_no_source():
    backend = project()
    job(backend, "success", tests_passed=3, tests_failed=0, tests_skipped=0, tests_total=3)
    assert cell_detail(backend, "pr", "a" * 40, "build", grouped=True).members[0].tests_text.endswith("of 3")


def test_a_job_s_counts_read_as_the_producer_printed_them_errors_xfailed_and_xpassed_too():
    from types import SimpleNamespace

    from hud.selectors_backend import _tests_text

    job = SimpleNamespace(
        tests_total=105,
        tests_passed=90,
        tests_failed=3,
        tests_error=2,
        tests_skipped=4,
        tests_xfailed=5,
        tests_xpassed=1,
        tests_source="",
        failed_tests_truncated=False,
    )
    assert _tests_text(job) == "90 passed · 3 failed · 2 errors · 4 skipped · 5 xfailed · 1 xpassed of 105"
    quiet = SimpleNamespace(**{**vars(job), "tests_error": 0, "tests_xfailed": None, "tests_xpassed": 0})
    assert _tests_text(quiet) == "90 passed · 3 failed · 4 skipped of 105"


def test_bisection_probes_are_never_heads_on_any_tab():
    """Issue 50 item 7: a probe (event `bisect`) is a commit a bisection tried, not a head tested."""
    backend = project()
    job(backend, sha="c" * 40, event_type="nightly", run_id="n1")
    job(backend, sha="d" * 40, event_type="bisect", delivery_key="bisect-1-1", run_id="p1")
    job(backend, sha="e" * 40, event_type="bisect", delivery_key="bisect-1-2", run_id="p2")
    assert heads_in_window(backend, "pr", SINCE) == []
    assert [h["head_sha"] for h in heads_in_window(backend, "nightly", SINCE)] == ["c" * 40]
    assert matrix_of(backend).rows == []
