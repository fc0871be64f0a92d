"""The stored hourly rollups give the summary pages exactly the numbers the on-demand computation
gives on the same data, and the periodic refresh notices every kind of late change."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from hud.selectors_summary import summary_build
from relay.callbacks import job_rows
from relay.models import JobRun, RollupState, TallyRollup
from relay.tallies import rollups
from relay.tallies.buckets import bucket_compute, window_buckets
from relay.tallies.rollups import rollups_refresh, tally_dump, window_tallies
from relay.tallies.tally import tallies_merge
from tests.hud.test_selectors_summary import job, project  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]


def on_demand(days: int, now) -> dict:
    return tallies_merge(bucket_compute(bucket) for bucket in window_buckets(days, now))


def assert_same_as_on_demand(days: int = 30) -> None:
    now = timezone.now()
    cache.clear()
    stored, computed = window_tallies(days, now), on_demand(days, now)
    assert set(stored) == set(computed)
    for key, tally in computed.items():
        expected, got = tally_dump(tally), tally_dump(stored[key])
        for side in (expected, got):
            side["h"] = [[counts, pytest.approx(total)] for counts, total in side["h"]]
        assert got == expected, key


@pytest.fixture
def history():
    """Realistic shapes over a month: attempts and reruns, never-started, superseded, timed out,
    nightlies, the reference backend's imported rows, and jobs still running."""
    now = timezone.now()
    backend, other = project("vendor/ci"), project("other/ci", level="L3")
    reference = project("pytorch/openreg-reference", is_reference=True)
    for day in range(0, 29, 3):
        at = now - timedelta(days=day, hours=2)
        sha = f"{day:02d}" * 20
        job(backend, "failure", sha=sha, attempt=1, at=at)
        job(backend, "success", sha=sha, attempt=2, at=at + timedelta(hours=1, minutes=5))  # a rerun, next hour
        job(backend, "success", sha=sha, name="lint", at=at)
        job(other, "cancelled", sha=sha, ended_by="superseded", at=at)
        job(
            other,
            "timed_out",
            sha=sha,
            name="",
            workflow_name="(no run started)",
            run_id="-",
            ended_by="never_started",
            at=at,
        )
        job(reference, "success", sha=sha, ended_by="imported", delivery_key=sha, at=at)
        job(backend, "failure", sha=sha, event_type="nightly", name="nightly", at=at)
    running = job(backend, sha="f" * 40, name="long", status="in_progress", at=now - timedelta(hours=3))
    JobRun.objects.update(updated_at=now - timedelta(hours=1))  # written long before the refreshes below
    return {"backend": backend, "other": other, "running": running, "now": now}


def test_the_stored_rollups_give_the_numbers_the_on_demand_computation_gives(history):
    report = rollups_refresh()
    assert report.recomputed > 0 and report.pending == 0
    assert TallyRollup.objects.filter(size="d").exists()
    for days in (1, 7, 30):
        assert_same_as_on_demand(days)


def test_a_job_that_completes_after_its_hour_was_rolled_up_is_counted_at_the_next_refresh(history):
    rollups_refresh()
    running = history["running"]
    # The sweeper ends a running job with a plain UPDATE: no updated_at, noticed as an open hour.
    JobRun.objects.filter(pk=running.pk).update(status="completed", conclusion="timed_out", ended_by="timed_out")
    rollups_refresh()
    assert_same_as_on_demand()
    # Then the real result replaces the sweeper's verdict, as a callback writes it (updated_at).
    key = {name: getattr(running, name) for name in job_rows.JOB_KEY}
    made_for = "dispatch" if running.dispatch_id else "self-report"
    completion = job_rows.job_complete_change(
        key, {"status": "completed", "conclusion": "success", "ended_by": ""}, (), timezone.now(), made_for, {}
    )
    assert job_rows.change_apply(completion)[0] is not None
    rollups_refresh()
    assert_same_as_on_demand()


def test_a_retry_days_later_changes_the_verdict_of_the_hour_of_the_first_attempt(history):
    rollups_refresh()
    backend, now = history["backend"], history["now"]
    job(backend, "failure", sha="ab" * 20, name="late", at=now - timedelta(days=4))
    rollups_refresh()
    job(backend, "success", sha="ab" * 20, name="late", attempt=2, at=now - timedelta(minutes=30))
    rollups_refresh()
    assert_same_as_on_demand()
    assert window_tallies(30, now)[(backend.pk, "pr")].flaky >= 1


def test_a_row_written_with_an_old_date_after_the_refresh_is_picked_up_by_its_id(history):
    rollups_refresh()
    RollupState.objects.update(refreshed_at=timezone.now() + timedelta(minutes=10))  # no updated_at match
    job(history["other"], "failure", sha="cd" * 20, at=history["now"] - timedelta(days=20))
    RollupState.objects.update(refreshed_at=timezone.now())
    rollups_refresh()
    assert_same_as_on_demand()


def test_a_page_refreshes_stale_rollups_itself_and_a_warm_page_recomputes_no_closed_hour(history, monkeypatch):
    rollups_refresh()
    RollupState.objects.update(finished_at=timezone.now() - timedelta(hours=1))
    job(history["backend"], "failure", sha="ef" * 20, at=history["now"] - timedelta(days=2))
    summary_build("30d", "pr")
    assert_same_as_on_demand()
    computed = []
    monkeypatch.setattr(rollups, "_hour_store", computed.append)
    summary_build("30d", "pr")
    assert computed == []


def test_only_one_refresh_runs_at_a_time(history):
    rollups_refresh()
    RollupState.objects.update(claimed_until=timezone.now() + timedelta(minutes=1))
    assert rollups_refresh() is None
