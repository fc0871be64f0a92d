"""Overdue jobs (test-infra #8800/#8801): running past their expected duration, shown on the grid,
the backend page and the relay-health card before the sweeper times them out."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from hud.selectors_backend import dashboard_build
from hud.selectors_grid import GridFilters, grid_page
from hud.selectors_summary import summary_build
from relay.health.healthz import HEARTBEAT_KEY
from relay.models import RelayState
from relay.policy.verdicts import STATES, Counts, State
from relay.results.overdue import expected_durations, expected_from, overdue_job_ids, running_jobs_overdue
from tests.factories import JobRunFactory, ProjectFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db
SHA = "d" * 40


@pytest.fixture(autouse=True)
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


def history(project, minutes: list[float], job: str = "test", now=None):
    """Finished runs of one job, oldest first, each with its relay-measured execution time."""
    now = now or timezone.now()
    for i, m in enumerate(minutes):
        at = now - timedelta(days=1, minutes=len(minutes) - i)
        JobRunFactory(
            project=project,
            job_name=job,
            head_sha=f"{i:040x}",
            execution_seconds=m * 60,
            created_at=at,
            in_progress_at=at,
        )


def running(project, for_minutes: float, job: str = "test", sha: str = SHA, now=None):
    now = now or timezone.now()
    return JobRunFactory(
        project=project,
        job_name=job,
        head_sha=sha,
        status="in_progress",
        conclusion="",
        in_progress_at=now - timedelta(minutes=for_minutes),
        created_at=now - timedelta(minutes=for_minutes),
    )


# --- the rule ----------------------------------------------------------------------------------------


def test_expected_duration_is_one_and_a_half_times_the_p90_of_recent_runs():
    assert expected_from([20 * 60] * 9 + [30 * 60]) == timedelta(minutes=30)
    assert expected_from([60.0] * 10) == timedelta(minutes=10), "never under ten minutes"
    assert expected_from([5 * 3600.0] * 10) == timedelta(hours=4.5), "overdue for a while before the 6 h timeout"


def test_a_job_with_too_little_history_expects_the_configured_default(settings):
    settings.CRCR_JOB_EXPECTED_MINUTES = 180
    assert expected_from([600.0] * 4) == timedelta(hours=3)
    settings.CRCR_JOB_TIMEOUT_HOURS = 0.05  # sandbox: jobs time out after 3 minutes
    assert expected_from([600.0] * 4) == expected_from([600.0] * 10) == timedelta(minutes=2.25)


def test_the_history_is_the_jobs_own_latest_twenty_callback_finished_runs_on_that_backend():
    now = timezone.now()
    xpu, other = ProjectFactory(), ProjectFactory()
    history(xpu, [300] * 10 + [10] * 20, now=now)  # old slow runs fall out of the latest twenty
    history(other, [10] * 10, job="test", now=now)
    JobRunFactory(
        project=xpu,
        job_name="test",
        ended_by="timed_out",
        conclusion="timed_out",
        execution_seconds=99999,
        created_at=now,
    )
    expected = expected_durations({(xpu.id, "ci", "test"), (other.id, "ci", "test")}, now)
    assert expected == {(xpu.id, "ci", "test"): timedelta(minutes=15), (other.id, "ci", "test"): timedelta(minutes=15)}


def test_a_running_job_is_overdue_only_past_its_expected_duration():
    now = timezone.now()
    xpu = ProjectFactory()
    history(xpu, [20] * 10, now=now)
    late, fine = running(xpu, 31, now=now), running(xpu, 29, job="test", sha="e" * 40, now=now)
    fresh = running(ProjectFactory(), 170, job="new-job", now=now)
    assert overdue_job_ids([late, fine, fresh], now) == {late.id}


def test_overdue_is_pending_not_a_verdict():
    assert STATES[State.OVERDUE].counts == Counts.PENDING and STATES[State.OVERDUE].glyph != STATES[State.RUNNING].glyph


# --- where it shows ----------------------------------------------------------------------------------


def test_the_grid_shows_an_overdue_job_as_overdue_and_a_failure_still_first():
    xpu, rocm = ProjectFactory(display_name="XPU"), ProjectFactory(display_name="ROCm")
    UpstreamCommitFactory(sha=SHA, title="t")
    history(xpu, [20] * 10)
    history(rocm, [20] * 10)
    running(xpu, 45)
    running(rocm, 45)
    JobRunFactory(project=rocm, job_name="build", head_sha=SHA, conclusion="failure")
    grid = grid_page(GridFilters())
    states = {col.project.id: cell.state for col, cell in zip(grid.columns, grid.rows[0].cells, strict=True)}
    assert states == {xpu.id: State.OVERDUE, rocm.id: State.FAILURE}


def test_the_backend_page_shows_the_overdue_cell():
    xpu = ProjectFactory()
    history(xpu, [20] * 10)
    running(xpu, 45)
    running(xpu, 5, job="lint")
    row = next(r for r in dashboard_build(xpu, "7d", "pr", 1, grouped=True).matrix.rows if r.sha == SHA)
    assert {c.column.title: c.state for c in row.cells if c.verdicts} == {"test": State.OVERDUE, "lint": State.RUNNING}


def test_the_relay_health_card_counts_overdue_jobs_and_degrades_only_for_jobs_stuck_past_the_timeout():
    RelayState.objects.create(key=HEARTBEAT_KEY, value={})
    xpu = ProjectFactory()
    history(xpu, [20] * 10)
    running(xpu, 45)
    card = next(c for c in summary_build("7d", "pr", timezone.now()).cards if c.key == "sweeper")
    # Its headline is what its state is judged by (it read "Healthy · 1 overdue"); overdue ones are in the detail.
    assert (card.state, card.headline) == ("healthy", "none stuck") and card.detail.startswith("1 running past")
    running(xpu, 7 * 60, job="hung")
    cache.clear()
    card = next(c for c in summary_build("7d", "pr", timezone.now()).cards if c.key == "sweeper")
    assert (card.state, card.headline) == ("degraded", "1 stuck past the 6 h timeout") and card.detail.startswith(
        "2 running past"
    )
    assert [j.job_name for j in running_jobs_overdue(xpu)] == ["hung", "test"]


def test_the_health_card_agrees_with_the_grid_when_the_default_is_shorter_than_ten_minutes(settings):
    settings.CRCR_JOB_EXPECTED_MINUTES = 2
    xpu = ProjectFactory()
    job = running(xpu, 5, job="brand-new")
    assert overdue_job_ids([job]) == {job.id}
    assert [j.id for j in running_jobs_overdue()] == [job.id]
