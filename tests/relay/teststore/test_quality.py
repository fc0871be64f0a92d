"""The quality figures, checked against counts done by hand on a small world: coverage of the
reference's tests, flaky share, time to recover, and each one's trend."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.results.quality import quality_of
from relay.teststore.store import commit_record, store_sweep
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db
FLAKY = {"classname": "test_ops.TestFooXPU", "name": "test_mul_xpu_float32", "file": "test/test_ops.py"}
BROKEN = {"classname": "test_ops.TestFooXPU", "name": "test_add_xpu_float32", "file": "test/test_ops.py"}


def ran(project, commit, total, skipped=0, failed=(), conclusion=None, attempt=1, at=None, accelerator=None):
    job = JobRunFactory(
        tests_accelerator_ran=accelerator,
        project=project,
        head_sha=commit.sha,
        run_id=f"{commit.sha[:8]}{project.pk}",
        run_attempt=attempt,
        conclusion=conclusion or ("failure" if failed else "success"),
        tests_total=total,
        tests_skipped=skipped,
        tests_failed=len(failed) or None,
        created_at=at or commit.landed_at + timedelta(minutes=attempt),
    )
    for test in failed:
        FailedTestFactory(job_run=job, **test)


@pytest.fixture
def world(db):
    """Eight trunk commits 12 h apart over four days. The reference runs 100 tests on each; XPU
    runs 60 of them (70 reported, 10 skipped). XPU goes red at commit 2 and green at commit 5
    (36 h), red again at 6 and green at 7 (12 h); test_mul flakes (fails, passes on retry) at 1."""
    now = timezone.now()
    reference = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True)
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L3")
    commits = [UpstreamCommitFactory(landed_at=now - timedelta(hours=96 - 12 * n)) for n in range(8)]
    for n, commit in enumerate(commits):
        ran(reference, commit, 100)
        red = n in (2, 3, 4, 6)
        ran(xpu, commit, 70, 10, [BROKEN] if red else [FLAKY] if n == 1 else [])
        if n == 1:
            ran(xpu, commit, 70, 10, attempt=2)
        for project in (reference, xpu):
            commit_record(commit.sha, project)  # as the minute sweep did when each finished
    return {"reference": reference, "xpu": xpu, "now": now}


def figures(world, days=5):
    now = world["now"]
    quality = quality_of(world["xpu"], world["reference"], now - timedelta(days=days), now + timedelta(minutes=30))
    return {f.key: f for f in quality.figures}


def test_coverage_is_the_share_of_the_reference_s_tests_the_backend_ran(world):
    coverage = figures(world)["coverage"]
    assert coverage.value == pytest.approx(60 / 100) and coverage.met is False
    assert coverage.detail == "8 commits both ran with per-test counts"


def test_coverage_counts_the_accelerator_classified_tests_where_both_reports_classify_them(world):
    """Two more commits where both sides' reports classify their tests: the reference runs 40
    ACCELERATOR tests, XPU 30 of them; the other eight commits still count over every test."""
    reference, xpu, now = world["reference"], world["xpu"], world["now"]
    for hours in (20, 10):
        commit = UpstreamCommitFactory(landed_at=now - timedelta(hours=hours))
        ran(reference, commit, 100, accelerator=40)
        ran(xpu, commit, 70, 10, accelerator=30)
        for project in (reference, xpu):
            commit_record(commit.sha, project)
    coverage = figures(world)["coverage"]
    assert coverage.value == pytest.approx((8 * 60 + 2 * 30) / (8 * 100 + 2 * 40))
    assert (
        coverage.detail == "10 commits both ran with per-test counts, 2 of them over the ACCELERATOR-classified tests"
    )


def test_a_backend_whose_report_does_not_classify_is_counted_over_every_test(world):
    commit = UpstreamCommitFactory(landed_at=world["now"] - timedelta(hours=5))
    ran(world["reference"], commit, 100, accelerator=40)
    ran(world["xpu"], commit, 70, 10)
    for project in (world["reference"], world["xpu"]):
        commit_record(commit.sha, project)
    assert figures(world)["coverage"].value == pytest.approx(9 * 60 / (9 * 100))


def test_the_flaky_share_is_the_flaky_tests_over_the_tests_run(world):
    flaky = figures(world)["flaky_share"]
    assert flaky.value == pytest.approx(1 / 60) and flaky.met is True
    assert flaky.detail == "1 flaky of 60 run"


def test_time_to_recover_is_the_median_from_first_red_to_first_green(world):
    recover = figures(world)["time_to_recover"]
    assert recover.value == pytest.approx((36 + 12) / 2 / 24) and recover.met is True
    assert (recover.earlier, recover.later) == (pytest.approx(36 / 24), pytest.approx(12 / 24))
    assert recover.trend == "↓"


def test_a_streak_still_red_past_three_days_misses_the_target(world):
    later = UpstreamCommitFactory(landed_at=world["now"] + timedelta(minutes=5))
    ran(world["xpu"], later, 70, 10, [BROKEN])
    store_sweep(world["now"] + timedelta(minutes=20))
    recover = quality_of(
        world["xpu"], world["reference"], world["now"] - timedelta(days=5), world["now"] + timedelta(days=4)
    ).figure("time_to_recover")
    assert recover.met is False and "red since" in recover.detail


def test_a_window_without_tested_commits_has_no_data_never_a_target_met(world):
    empty = figures({**world, "now": world["now"] - timedelta(days=30)}, days=1)
    assert [(f.value, f.met) for f in empty.values()] == [(None, None)] * 2 + [(None, None)]


def test_the_api_answers_the_same_figures(client, world):
    body = client.get("/api/v1/quality", {"range": "7d", "backend": "intel/torch-xpu-ops"}).json()
    (backend,) = body["backends"]
    by = {f["figure"]: f for f in backend["figures"]}
    assert by["coverage"]["value"] == pytest.approx(0.6) and by["flaky_share"]["value"] == pytest.approx(1 / 60)
    assert client.get("/api/v1/quality", {"range": "1y"}).status_code == 400


def test_the_flaky_share_names_its_count_so_a_small_share_never_reads_zero(client, world):
    """2 of 5,421 read "Flaky 0.0 %": the figure carries the count it is made of, and the page shows it."""
    flaky = figures(world)["flaky_share"]
    assert (flaky.count, flaky.of, flaky.counted) == (1, 60, "1 of 60")
    body = client.get("/api/v1/quality", {"range": "7d", "backend": "intel/torch-xpu-ops"}).json()
    by = {f["figure"]: f for f in body["backends"][0]["figures"]}
    assert (by["flaky_share"]["count"], by["flaky_share"]["of"]) == (1, 60)


def test_an_open_break_is_the_longest_time_to_recover_not_none(world):
    """Red on the newest commits and never green since: the figure is that break's age, not the
    median of the streaks that did recover, and it says the break is open."""
    for hours in (3, 2):
        red = UpstreamCommitFactory(landed_at=world["now"] + timedelta(hours=hours))
        ran(world["xpu"], red, 70, 10, [BROKEN])
        commit_record(red.sha, world["xpu"])
    until = world["now"] + timedelta(hours=30)
    recover = quality_of(world["xpu"], world["reference"], world["now"] - timedelta(days=5), until).figure(
        "time_to_recover"
    )
    opened = world["now"] + timedelta(hours=2, minutes=1)  # the older of the two red commits
    assert recover.open and recover.value == pytest.approx((until - opened).total_seconds() / 86400)
    assert recover.value > (36 + 12) / 2 / 24 and recover.met is True and "not recovered yet" in recover.detail


def test_an_open_break_alone_is_data_never_no_data_marked_met(world):
    """A window whose only streak is still red had value None beside ✓ met."""
    now = world["now"] + timedelta(days=10)
    red = UpstreamCommitFactory(landed_at=now)
    ran(world["xpu"], red, 70, 10, [BROKEN])
    commit_record(red.sha, world["xpu"])
    recover = quality_of(world["xpu"], world["reference"], now - timedelta(hours=1), now + timedelta(hours=6))
    figure = recover.figure("time_to_recover")
    assert figure.value == pytest.approx((6 * 3600 - 60) / 86400) and figure.met is True and figure.open
    for f in recover.figures:
        assert (f.value is None) == (f.met is None)


def test_each_figure_has_its_trend_as_a_series_one_point_a_day(client, world):
    """No quality figure had a chart: each now carries its series, read from the same rows, and
    the API, the backend page and /crcr give it (plotted from our static plotly)."""
    quality = figures(world)
    steps = [start for start, _ in quality["coverage"].series]
    assert len(steps) == 6 and all(b - a == timedelta(days=1) for a, b in zip(steps, steps[1:]))
    covered = [value for _, value in quality["coverage"].series if value is not None]
    assert len(covered) >= 4 and covered == [pytest.approx(0.6)] * len(covered)
    recovered = sorted(value for _, value in quality["time_to_recover"].series if value is not None)
    assert recovered == [pytest.approx(12 / 24), pytest.approx(36 / 24)]
    assert sum(value for _, value in quality["flaky_share"].series) == 1  # test_mul became flaky once
    body = client.get("/api/v1/quality", {"range": "7d", "backend": "intel/torch-xpu-ops"}).json()
    coverage = next(f for f in body["backends"][0]["figures"] if f["figure"] == "coverage")
    assert len(coverage["series"]["points"]) == 7 and coverage["series"]["measures"]
    for path in ("/crcr/intel/torch-xpu-ops", "/crcr"):
        page = client.get(path).content.decode()
        assert 'id="chart-quality-coverage"' in page and 'id="figure-quality-time_to_recover"' in page
        assert "vendor/plotly-basic.min.js" in page and "js/hud-charts.js" in page
