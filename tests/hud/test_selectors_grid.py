"""Grid, PR-page and gate selectors under the one status policy."""

from datetime import timedelta

import pytest
from django.http import QueryDict
from django.utils import timezone

from hud.selectors_grid import GridFilters, commit_pr_number, grid_page, pr_page
from relay.policy.verdicts import State, awaiting_results_state
from relay.results.baseline import MARK_LABELS
from relay.results.cells import cells_for_commits, registered_backends
from relay.results.gate import gate_shown
from relay.results.heads import sha_resolve
from tests.factories import (
    DeliveryFactory,
    DispatchFactory,
    FailedTestFactory,
    JobRunFactory,
    ProjectFactory,
    UpstreamCommitFactory,
)

pytestmark = pytest.mark.django_db

NOW = timezone.now()


@pytest.fixture
def backends():
    return {
        "ref": ProjectFactory(
            full_name="pytorch/openreg-ci",
            is_reference=True,
            hardware_kind="reference",
            display_name="OpenReg",
            position=5,
        ),
        "xpu": ProjectFactory(full_name="intel/torch-xpu-ops", level="L4", display_name="Intel XPU"),
        "rocm": ProjectFactory(full_name="ROCm/pytorch", level="L3", device="rocm", display_name="AMD ROCm"),
        "mps": ProjectFactory(full_name="pytorch-mps/mps-ci", level="L2", display_name="Apple MPS"),
        "vllm": ProjectFactory(
            full_name="vllm-project/vllm", level="L2", hardware_kind="ecosystem", display_name="vLLM"
        ),
        "sgl": ProjectFactory(
            full_name="sgl-project/sglang", level="L1", hardware_kind="ecosystem", display_name="SGLang"
        ),
    }


def trunk(n: int, **fields):
    return [UpstreamCommitFactory(landed_at=NOW - timedelta(minutes=i), **fields) for i in range(n)]


def run(project, sha, conclusion="success", **fields):
    return JobRunFactory(project=project, head_sha=sha, conclusion=conclusion, **fields)


def dispatch(project, sha, state="sent", pr_number=None):
    return DispatchFactory(
        project=project,
        delivery=DeliveryFactory(head_sha=sha, pr_number=pr_number),
        head_sha=sha,
        pr_number=pr_number,
        state=state,
    )


def filters(query: str = "") -> GridFilters:
    return GridFilters.from_query(QueryDict(query))


def column_names(grid) -> list[str]:
    return [c.label for c in grid.columns]


def cell(grid, sha, project):
    row = next(r for r in grid.rows if r.commit.sha == sha)
    return next(c for c, col in zip(row.cells, grid.columns) if col.project.id == project.id and col.job is None)


# --- columns and cells --------------------------------------------------------------------------


def test_columns_pin_the_reference_first_then_l4_l3_l2_and_l1(backends):
    ProjectFactory(full_name="pytorch/crcr-health-probe", is_health_probe=True)
    ProjectFactory(full_name="gone/backend", active=False)
    trunk(1)
    assert column_names(grid_page(filters())) == ["OpenReg", "Intel XPU", "AMD ROCm", "Apple MPS", "vLLM", "SGLang"]
    assert [g.key for g in grid_page(filters()).groups] == ["ref", "L4", "L3", "L2", "L1"]


def test_a_cell_shows_the_latest_attempt_and_a_pass_after_a_failure_is_flaky(backends):
    (commit,) = trunk(1)
    run(backends["xpu"], commit.sha, "failure", run_attempt=1, run_id="1")
    run(backends["xpu"], commit.sha, "success", run_attempt=2, run_id="1")
    run(backends["mps"], commit.sha, "success", run_attempt=1, run_id="2")
    run(backends["mps"], commit.sha, "failure", run_attempt=2, run_id="2")
    grid = grid_page(filters())
    assert cell(grid, commit.sha, backends["xpu"]).state == State.FLAKY
    assert cell(grid, commit.sha, backends["mps"]).state == State.FAILURE


def test_l1_cells_show_only_the_dispatch_and_l2_cells_wait_for_results(backends):
    (commit,) = trunk(1)
    dispatch(backends["sgl"], commit.sha, "sent")
    dispatch(backends["vllm"], commit.sha, "sent")
    dispatch(backends["mps"], commit.sha, "not_installed")
    grid = grid_page(filters())
    assert cell(grid, commit.sha, backends["sgl"]).state == State.DISPATCHED
    assert cell(grid, commit.sha, backends["vllm"]).state == State.QUEUED
    assert cell(grid, commit.sha, backends["mps"]).state == State.NOT_INSTALLED
    assert cell(grid, commit.sha, backends["rocm"]).state == State.NO_RESULT


def test_a_sent_dispatch_without_results_is_queued_for_results_backends():
    assert awaiting_results_state(["sent"]) == State.QUEUED
    assert awaiting_results_state(["pending"]) == State.DISPATCH_PENDING
    assert awaiting_results_state([]) == State.NO_RESULT


def test_failing_cells_carry_the_baseline_mark_and_reference_job_failures_flag_the_row(backends):
    shared, own = trunk(2)
    run(backends["ref"], shared.sha, "failure", tests_total=None)
    run(backends["xpu"], shared.sha, "failure")
    run(backends["ref"], own.sha, "success", tests_total=10)
    job = run(backends["xpu"], own.sha, "failure", tests_total=10, tests_failed=1)
    FailedTestFactory(job_run=job, classname="TestFooXPU", name="test_add_xpu")
    grid = grid_page(filters())
    assert cell(grid, shared.sha, backends["xpu"]).mark == "shared" and grid.rows[0].upstream_broken
    assert cell(grid, own.sha, backends["xpu"]).mark == "backend" and not grid.rows[1].upstream_broken
    assert cell(grid, shared.sha, backends["ref"]).mark is None


def test_a_backend_expands_into_one_column_per_job(backends):
    (commit,) = trunk(1)
    run(backends["xpu"], commit.sha, "failure", job_name="test-1")
    run(backends["xpu"], commit.sha, "success", job_name="build")
    grid = grid_page(filters("expand=Intel/Torch-XPU-Ops"))
    assert column_names(grid)[1:4] == ["Intel XPU", "ci / build", "ci / test-1"]
    row = grid.rows[0]
    assert [c.state for c in row.cells[1:4]] == [State.FAILURE, State.SUCCESS, State.FAILURE]


# --- rows ---------------------------------------------------------------------------------------


def test_rows_are_trunk_pushes_newest_first_fifty_per_page(backends):
    commits = trunk(51)
    UpstreamCommitFactory(is_trunk=False, pr_number=7, landed_at=NOW + timedelta(hours=1))
    first = grid_page(filters())
    assert [r.commit.sha for r in first.rows] == [c.sha for c in commits[:50]] and first.has_next
    second = grid_page(filters("page=2"))
    assert [r.commit.sha for r in second.rows] == [commits[50].sha] and not second.has_next


def test_the_toggle_shows_pr_heads_instead_of_trunk(backends):
    trunk(2)
    head = UpstreamCommitFactory(is_trunk=False, pr_number=7, title="Add XPU kernels")
    assert [r.commit.sha for r in grid_page(filters("heads=pr")).rows] == [head.sha]


def test_a_trunk_commit_names_its_pr_at_the_end_of_its_title():
    assert commit_pr_number(UpstreamCommitFactory.build(title="Fix it (#123)")) == 123
    assert commit_pr_number(UpstreamCommitFactory.build(title="Fix #12 later")) is None
    assert commit_pr_number(UpstreamCommitFactory.build(title="x", pr_number=9)) == 9


def test_a_short_sha_resolves_to_the_recorded_commit(backends):
    (commit,) = trunk(1)
    match = sha_resolve(commit.sha[:8].upper())
    assert (match.sha, match.commit) == (commit.sha, commit)
    run(backends["xpu"], "f" * 40)
    match = sha_resolve("fffffff")
    assert (match.sha, match.commit) == ("f" * 40, None)
    assert sha_resolve("1234567").sha is None


# --- filters ------------------------------------------------------------------------------------


def test_the_level_filter_keeps_the_reference_pinned(backends):
    trunk(1)
    assert column_names(grid_page(filters("level=L4&level=L1"))) == ["OpenReg", "Intel XPU", "SGLang"]


def test_device_and_hardware_filters(backends):
    trunk(1)
    assert column_names(grid_page(filters("device=rocm"))) == ["OpenReg", "AMD ROCm"]
    assert column_names(grid_page(filters("hw=ecosystem"))) == ["OpenReg", "vLLM", "SGLang"]


def test_the_name_filter_matches_backends_by_substring_or_regex(backends):
    trunk(1)
    assert column_names(grid_page(filters("name=XPU"))) == ["OpenReg", "Intel XPU"]
    assert column_names(grid_page(filters("name=^(rocm|vllm)&regex=1"))) == ["OpenReg", "AMD ROCm", "vLLM"]


def test_the_name_filter_keeps_a_backend_whose_job_matches_and_shows_only_that_job(backends):
    (commit,) = trunk(1)
    run(backends["mps"], commit.sha, job_name="inductor-test")
    run(backends["mps"], commit.sha, job_name="build")
    grid = grid_page(filters("name=inductor&expand=pytorch-mps/mps-ci"))
    assert column_names(grid) == ["OpenReg", "Apple MPS", "ci / inductor-test"]


def test_an_invalid_regex_is_reported_not_raised(backends):
    trunk(1)
    grid = grid_page(filters("name=(unclosed&regex=1"))
    assert "Invalid regular expression" in grid.name_error and len(grid.columns) == 6


def test_hide_green_drops_columns_without_a_failure(backends):
    (commit,) = trunk(1)
    run(backends["rocm"], commit.sha, "failure")
    run(backends["xpu"], commit.sha, "success")
    assert column_names(grid_page(filters("hide_green=1"))) == ["OpenReg", "AMD ROCm"]


def test_failures_only_keeps_rows_with_a_failing_cell(backends):
    red, green = trunk(2)
    run(backends["rocm"], red.sha, "timed_out", ended_by="timed_out")
    run(backends["rocm"], green.sha, "success")
    grid = grid_page(filters("failures=1"))
    assert [r.commit.sha for r in grid.rows] == [red.sha] and grid.commits_on_page == 2


def test_filters_round_trip_through_the_query_string():
    query = "level=L4&level=L3&device=rocm&hw=gpu&name=x&regex=1&hide_green=1&failures=1&heads=pr&page=3&expand=a/b"
    parsed = filters(query)
    assert filters(parsed.query(page=parsed.page)) == parsed
    assert "page" not in parsed.query() and "expand=a%2Fb" in parsed.query()
    assert filters(parsed.query(expand=parsed.toggled_expand("A/B"))).expand == ()


def test_the_grid_costs_a_constant_number_of_queries(backends, django_assert_max_num_queries):
    commits = trunk(50)
    for commit in commits:
        for project in list(backends.values())[:5]:
            job = run(project, commit.sha, "failure" if project.level == "L3" else "success", tests_total=5)
            FailedTestFactory(job_run=job) if project.level == "L3" else None
    with django_assert_max_num_queries(
        9
    ):  # commits, backends, jobs, closing PRs, issues, expectations, tests, mutes, probes
        grid = grid_page(filters("expand=ROCm/pytorch"))
    assert len(grid.rows) == 50 and len(grid.columns) == 7


# --- PR page ------------------------------------------------------------------------------------


def test_the_pr_page_has_one_row_per_head_sha(backends):
    old = UpstreamCommitFactory(is_trunk=False, pr_number=42, landed_at=NOW - timedelta(hours=2))
    new = UpstreamCommitFactory(is_trunk=False, pr_number=42, landed_at=NOW - timedelta(hours=1))
    run(backends["xpu"], old.sha, "failure", pr_number=42)
    run(backends["xpu"], new.sha, "success", pr_number=42)
    run(backends["xpu"], "e" * 40, "success", pr_number=42, created_at=NOW)
    page = pr_page(42)
    assert [h.sha for h in page.heads] == ["e" * 40, new.sha, old.sha]
    assert [h.row.cells[1].state for h in page.heads] == [State.SUCCESS, State.SUCCESS, State.FAILURE]


def test_the_pr_summary_counts_backends_and_says_why_they_fail(backends):
    head = UpstreamCommitFactory(is_trunk=False, pr_number=42)
    run(backends["ref"], head.sha, "success", pr_number=42, tests_total=3)
    run(backends["xpu"], head.sha, "success", pr_number=42)
    run(backends["rocm"], head.sha, "failure", pr_number=42)
    run(backends["mps"], head.sha, status="in_progress", conclusion="", pr_number=42)
    dispatch(backends["sgl"], head.sha, pr_number=42)
    assert pr_page(42).summary == "2/4 backends passed, 1 running, 1 failing (backend-specific)"


def test_the_pr_page_shows_the_gate_only_when_l4_backends_exist(backends):
    head = UpstreamCommitFactory(is_trunk=False, pr_number=42)
    run(backends["xpu"], head.sha, "failure", pr_number=42)
    assert pr_page(42).gate["state"] == "failure"
    backends["xpu"].delete()
    assert pr_page(42).gate is None


# --- gate ---------------------------------------------------------------------------------------


def test_the_gate_passes_when_every_l4_job_passed_and_ignores_other_levels(backends):
    run(backends["xpu"], "1" * 40, "success", pr_number=7)
    run(backends["rocm"], "1" * 40, "failure", pr_number=7)
    verdict = gate_shown(7, "1" * 40)
    assert (verdict["state"], verdict["status"], verdict["conclusion"]) == ("success", "completed", "success")


def test_the_gate_is_pending_while_l4_work_is_dispatched_without_a_result(backends):
    dispatch(backends["xpu"], "2" * 40, "sent", pr_number=7)
    verdict = gate_shown(7, "2" * 40)
    assert (verdict["state"], verdict["status"], verdict["conclusion"]) == ("pending", "in_progress", None)


def test_a_certain_failure_wins_over_work_still_running(backends):
    run(backends["xpu"], "3" * 40, "failure", job_name="a", pr_number=7)
    run(backends["xpu"], "3" * 40, status="in_progress", conclusion="", job_name="b", pr_number=7)
    assert gate_shown(7, "3" * 40)["state"] == "failure"


def test_the_hud_shows_the_very_verdict_the_relay_writes_to_the_check_run(backends):
    from relay.results.gate import gate_verdict as relay_gate_verdict

    run(backends["xpu"], "3" * 40, "failure", job_name="a", pr_number=7)
    hud, relay = gate_shown(7, "3" * 40), relay_gate_verdict(7, "3" * 40)
    assert (hud["state"], hud["title"], hud["blocking"]) == (relay["state"], relay["title"], relay["blocking"])


@pytest.mark.parametrize(
    "fields, state",
    [
        ({"conclusion": "failure"}, "failure"),
        ({"conclusion": "timed_out", "ended_by": "timed_out"}, "failure"),
        ({"conclusion": "cancelled"}, "failure"),
        ({"conclusion": "cancelled", "ended_by": "superseded"}, "skipped"),
    ],
)
def test_the_gate_fails_on_failed_timed_out_or_cancelled_but_not_superseded_work(backends, fields, state):
    run(backends["xpu"], "4" * 40, pr_number=7, **fields)
    verdict = gate_shown(7, "4" * 40)
    assert verdict["state"] == ("success" if state == "skipped" else state)
    assert verdict["blocking"] == ([] if state == "skipped" else [backends["xpu"].full_name])


def test_the_gate_judges_the_latest_attempt_even_when_attempt_1_reports_last(backends):
    UpstreamCommitFactory(sha="5" * 40, is_trunk=False, pr_number=7)
    run(backends["xpu"], "5" * 40, "success", run_id="1", run_attempt=2, pr_number=7)
    run(backends["xpu"], "5" * 40, "failure", run_id="1", run_attempt=1, pr_number=7)  # a late callback
    assert gate_shown(7, "5" * 40)["state"] == "success"
    assert cell(grid_page(filters("heads=pr")), "5" * 40, backends["xpu"]).state == State.FLAKY


def test_cells_for_commits_answers_every_pair_even_without_data(backends):
    cells = cells_for_commits(["6" * 40], registered_backends())
    assert len(cells) == 6 and {c.state for c in cells.values()} == {State.NO_RESULT}


@pytest.mark.parametrize("mark", [*MARK_LABELS, None])
def test_the_pr_summary_has_words_for_every_mark_a_failing_cell_can_carry(mark):
    from hud.selectors_grid import _failing_kinds

    cell = type("Cell", (), {"mark": mark})()
    assert _failing_kinds([cell, cell]), f"no words for the {mark!r} mark"
