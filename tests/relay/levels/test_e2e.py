"""Upstream's end-to-end p50 (relay.levels.e2e): one sample per run, its longest queue plus the span from
its first start to its last completion, over PR jobs' latest attempts per (repo, run_id, job)."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from relay.levels.e2e import e2e_p50, e2e_p50s
from tests.hud.test_selectors_summary import job, project

pytestmark = pytest.mark.django_db
T0 = timezone.now().replace(microsecond=0) - timedelta(days=1)
SINCE = T0 - timedelta(days=1)


@pytest.fixture(autouse=True)
def _no_cached_p50():
    cache.clear()
    yield
    cache.clear()


def ran(backend, run_id, name, queue, start_min, end_min, attempt=1, event_type="pull_request"):
    return job(
        backend,
        run_id=run_id,
        name=name,
        attempt=attempt,
        event_type=event_type,
        at=T0 + timedelta(minutes=start_min),
        queue_seconds=queue,
        reported_started_at=T0 + timedelta(minutes=start_min),
        reported_completed_at=T0 + timedelta(minutes=end_min),
        sha=f"{hash(run_id) & 0xFFFFFFFF:040x}",
    )


def test_one_run_is_one_sample_its_longest_queue_plus_first_start_to_last_completion():
    backend = project()
    ran(backend, "1", "build", 60, 0, 30)
    ran(backend, "1", "test (1, 2)", 120, 5, 50)
    ran(backend, "1", "test (2, 2)", 30, 2, 40)
    assert e2e_p50(backend, SINCE) == 120 + 50 * 60


def test_the_latest_attempt_of_a_job_counts_not_an_earlier_one():
    backend = project()
    ran(backend, "1", "build", 0, 0, 300)  # attempt 1 took five hours
    ran(backend, "1", "build", 0, 0, 20, attempt=2)
    assert e2e_p50(backend, SINCE) == 20 * 60


def test_the_median_is_over_runs_not_jobs():
    backend = project()
    ran(backend, "1", "a", 0, 0, 10)  # a run of one job: 10 min
    for n in range(5):  # a run of five jobs: 60 min, five jobs but one sample
        ran(backend, "2", f"job {n}", 0, 0, 60)
    ran(backend, "3", "a", 0, 0, 100)
    assert e2e_p50(backend, SINCE) == 60 * 60


def test_an_even_number_of_runs_takes_the_mean_of_the_middle_two():
    backend = project()
    for run_id, minutes in (("1", 10), ("2", 20), ("3", 40), ("4", 80)):
        ran(backend, run_id, "a", 0, 0, minutes)
    assert e2e_p50(backend, SINCE) == 30 * 60


def test_push_and_nightly_runs_are_left_out_pr_events_only():
    backend = project()
    ran(backend, "1", "a", 0, 0, 10)
    ran(backend, "2", "a", 0, 0, 500, event_type="push")
    ran(backend, "3", "a", 0, 0, 500, event_type="nightly")
    assert e2e_p50(backend, SINCE) == 10 * 60


def test_a_run_id_is_a_backends_own_the_same_number_elsewhere_is_another_run():
    mine, theirs = project(), project()
    ran(mine, "42", "a", 0, 0, 10)
    ran(theirs, "42", "a", 0, 0, 500)
    assert (e2e_p50(mine, SINCE), e2e_p50(theirs, SINCE)) == (600, 500 * 60)


def test_no_completed_pr_run_is_no_data():
    backend = project()
    job(backend, status="in_progress", at=T0)
    assert e2e_p50(backend, SINCE) is None


def test_both_windows_are_read_at_once_and_answer_as_each_alone(django_assert_num_queries):
    backend = project()
    ran(backend, "1", "a", 0, 0, 10)  # yesterday: in both windows
    ran(backend, "2", "a", 0, -4 * 24 * 60, -4 * 24 * 60 + 100)  # five days ago: the wide window only
    wide = T0 - timedelta(days=7)
    with django_assert_num_queries(1):
        both = e2e_p50s(backend, [wide, SINCE])
    cache.clear()
    assert both == [e2e_p50(backend, wide), e2e_p50(backend, SINCE)] == [55 * 60, 10 * 60]
