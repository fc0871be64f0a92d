"""The stored excused counts (relay.tallies.excused) give /crcr the excused-jobs rule's own answer for
every range, on real producers' reports, and the refresh notices a reference result or a known
issue that arrives after the backend's failure."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.core.cache import cache
from django.utils import timezone

from hud.selectors_backend import dashboard_build
from hud.selectors_summary import summary_build
from relay.levels.readiness import readiness_inputs
from relay.models import ExcusedRollup, FailedTest, KnownIssue
from relay.reference.junit import junit_parse
from relay.results.excused import excused_jobs
from relay.tallies.buckets import window_buckets
from relay.tallies.excused import window_excused
from relay.tallies.rollups import rollups_refresh, rollups_state
from tests.hud.test_selectors_summary import job, project  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]
REPORTS = Path(__file__).parents[2] / "fixtures" / "pytorch-reports"
RANGES = {"24h": 1, "7d": 7, "14d": 14, "30d": 30, "90d": 90}
BACKENDS = [
    # (repo, device folder, report shape)
    ("intel/torch-xpu-ops", "xpu", "pytest-root.xml"),
    ("ROCm/pytorch", "cuda", "unittest/TEST-TestDeviceGenericCUDA.xml"),
    ("Ascend/pytorch", "npu", "unittest/TEST-TestDeviceGenericPRIVATEUSE1.xml"),
    ("pytorch-mps/mps-ci", "mps", "pytest-test-dir.xml"),
]


def reported(run, device: str, shape: str, only=None, extra=()):
    """The report's device-generic failures (or the first `only` of them) as the callback stores them."""
    report = junit_parse((REPORTS / device / shape).read_bytes())
    tests = [t for t in report.failed_tests if "TestDeviceGeneric" in t.classname and "CPU" not in t.classname]
    tests = [*tests[:only], *extra]
    for t in tests:
        FailedTest.objects.create(job_run=run, name=t.name, classname=t.classname, file=t.file)
    run.tests_failed, run.tests_total = len(tests), report.total
    run.save(update_fields=["tests_failed", "tests_total"])
    return run


class OwnFailure:
    name, classname, file = "test_own_regression", "test_device_generic.TestDeviceGenericPRIVATEUSE1", ""


@pytest.fixture
def store():
    """Three months of commits: on every third day upstream breaks device-generic tests (the OpenReg
    reference fails them too); each backend fails them there, sometimes with a failure of its own,
    sometimes with a truncated list; other days it passes, or fails alone; a retry a day later."""
    now = timezone.now()
    reference = project("pytorch/openreg-ci", is_reference=True, hardware_kind="reference")
    backends = [project(repo, level="L3") for repo, *_ in BACKENDS]
    for day in range(0, 88, 2):
        sha, at = f"{day:040x}", now - timedelta(days=day, hours=3)
        broken = day % 3 == 0
        ref = job(reference, "failure" if broken else "success", sha=sha, at=at)
        if broken:
            reported(ref, "openreg", "pytest-test-dir.xml")
        for i, (backend, (_, device, shape)) in enumerate(zip(backends, BACKENDS, strict=True)):
            mine = job(backend, "failure" if broken or (day + i) % 5 == 0 else "success", sha=sha, at=at)
            if broken:
                reported(mine, device, shape, extra=[OwnFailure] if (day + i) % 4 == 0 else ())
            elif mine.conclusion == "failure":
                reported(mine, device, shape, only=1)
        retried = job(backends[0], "failure", sha=sha, name="retried", attempt=1, at=at)
        reported(retried, "xpu", "pytest-root.xml")
        job(backends[0], "failure", sha=sha, name="retried", attempt=2, at=at + timedelta(days=1))
    return backends


def test_the_stored_counts_equal_the_rule_on_real_reports_for_every_range(store):
    rollups_refresh()
    now = timezone.now()
    for days in RANGES.values():
        since = window_buckets(days, now)[0].start
        counts = window_excused(since, now, rollups_state().generation)
        for backend in store:
            assert counts[backend.pk] == len(excused_jobs(backend, since)), (backend.full_name, days)
    assert sum(counts.values()) > 20  # the store has something to excuse


def test_the_summary_backend_page_and_readiness_panel_agree_on_the_adjusted_rate(store):
    rollups_refresh()
    now = timezone.now()
    for key in RANGES:
        summary = summary_build(key, "pr", now)
        rows = {row.project.pk: row for section in summary.sections for row in section.rows}
        for backend in store:
            board = dashboard_build(backend, key, "pr", 1, False, now)
            assert rows[backend.pk].adjusted.adjusted_pass_rate == board.adjusted.adjusted_pass_rate, (key, backend)
            assert rows[backend.pk].adjusted.excused_count == len(board.adjusted.excused)
    inputs = readiness_inputs(store[0], now)
    week = {row.project.pk: row for s in summary_build("7d", "pr", now).sections for row in s.rows}[store[0].pk]
    assert inputs.adjusted7.adjusted_pass_rate == week.adjusted.adjusted_pass_rate


def test_a_reference_failure_arriving_later_excuses_the_backends_job_after_the_refresh(client):
    reference = project("pytorch/openreg-ci", is_reference=True, hardware_kind="reference")
    backend = project("Ascend/pytorch", level="L3")
    sha = "e" * 40
    reported(job(backend, "failure", sha=sha, at=timezone.now() - timedelta(days=20)), "npu", BACKENDS[2][2])
    job(backend, "success", sha="f" * 40, at=timezone.now() - timedelta(days=20))
    assert "0 excused" in client.get("/crcr?range=30d").content.decode()
    reported(job(reference, "failure", sha=sha, at=timezone.now()), "openreg", "pytest-test-dir.xml")
    rollups_refresh()
    page = client.get("/crcr?range=30d").content.decode()
    assert "1 excused" in page and "✓ 100.0 %" in page
    assert ExcusedRollup.objects.get(project_id=backend.pk).excused == 1


def test_a_known_issue_opened_later_recounts_the_range(client):
    backend = project("Ascend/pytorch", level="L3")
    project("pytorch/openreg-ci", is_reference=True, hardware_kind="reference")
    reported(job(backend, "failure", at=timezone.now() - timedelta(days=60)), "npu", BACKENDS[2][2], only=1)
    job(backend, "success", sha="f" * 40, at=timezone.now() - timedelta(days=60))
    rollups_refresh()
    assert not ExcusedRollup.objects.exists()
    KnownIssue.objects.create(title="upstream broke it", kind="upstream", test_patterns=["*TestDeviceGeneric*"])
    rollups_refresh()
    cache.clear()
    assert "1 excused" in client.get("/crcr?range=90d").content.decode()


def test_the_summary_chip_counts_from_the_stored_hours_and_decides_as_the_listed_rule(store, monkeypatch):
    from relay.levels.status import repo_status
    from relay.results import excused as rule

    rollups_refresh()
    now = timezone.now()
    for backend in store:
        listed, counted = readiness_inputs(backend, now), readiness_inputs(backend, now, listed=False)
        for window in ("adjusted14", "adjusted7"):
            assert not getattr(counted, window).listed
            assert getattr(counted, window).excused_count == getattr(listed, window).excused_count, backend
        chip, page = repo_status(backend, now, listed=False), repo_status(backend, now)
        assert chip.change == page.change
        assert [(c.key, c.met) for c in chip.criteria] == [(c.key, c.met) for c in page.criteria]
    ran_over = []
    monkeypatch.setattr(rule, "excused_jobs", lambda project, since, until=None: ran_over.append(since) or [])
    cache.clear()
    summary_build("7d", "pr", now)
    assert ran_over == []  # no chip runs the rule over its window on a request
