"""Level decisions on enough evidence only (production's minimum sample: 20 jobs over 3 days):
a thin sample reads "not enough data yet" everywhere and demotes nobody, and a dispatch nobody
answered is no job, in the timeout rate or anywhere else the criteria count."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.levels.criteria import Sample, level_change, readiness
from relay.levels.events import readiness_events
from relay.models import NotificationEvent
from tests.hud.test_selectors_summary import job, project
from tests.relay.levels.test_criteria import LONG_AGO, NOW, criteria, tally

pytestmark = pytest.mark.usefixtures("production_sample")


@pytest.fixture
def production_sample(settings):
    settings.CRCR_LEVEL_MIN_JOBS, settings.CRCR_LEVEL_MIN_DATA_HOURS = 20, 72


def ago(hours: float):
    return timezone.now() - timedelta(hours=hours)


def l3_backend(passed: int, failed: int = 0, never_started: int = 0, first_hours_ago: float = 100):
    ascend = project("Ascend/pytorch", level="L3")
    job(ascend, "success", sha="f" * 40, at=ago(first_hours_ago))
    for i in range(passed + failed):
        job(ascend, "success" if i < passed else "failure", sha=f"{i:040x}", at=ago(1))
    for i in range(never_started):
        job(ascend, "", sha=f"{i + 500:040x}", at=ago(1), ended_by="never_started", run_id="-", workflow_name="")
    return ascend


@pytest.mark.parametrize(
    "jobs, hours, enough",
    [(20, 72.0, True), (19, 72.0, False), (20, 71.9, False), (500, None, False)],
)
def test_the_sample_is_enough_from_20_jobs_over_3_days_inclusive(jobs, hours, enough):
    assert Sample(jobs, hours).enough is enough


def test_a_thin_sample_misses_nothing_so_nobody_is_at_risk_and_the_page_says_why():
    thin = tally(passed=5, failed=5)  # a 50 % pass rate, on ten jobs
    result = readiness("L3", thin, thin, LONG_AGO, NOW - timedelta(hours=2), NOW)
    assert result.change is None and result.outlook == "no_data"
    assert {c.met for c in result.demotion} == {None}
    assert "not enough data yet: 10 jobs, results for 0.1 d (needs 20 jobs over 3 d)" in result.headline
    assert criteria(result, "demotion")["pass_rate"].note.startswith("not enough data yet")


def test_enough_evidence_of_a_miss_demotes():
    bad = tally(passed=15, failed=15)
    assert readiness("L3", bad, bad, LONG_AGO, LONG_AGO, NOW).change == "demote"


@pytest.mark.parametrize(
    "level, promotion, demotion, change",
    [
        ("L2", [True, True], [], "promote"),
        ("L2", [True, None], [], None),
        ("L2", [True, False], [], None),
        ("L3", [], [True, None], None),
        ("L3", [], [True, False], "demote"),
        ("L4", [], [None, False], "demote"),
        ("L1", [False], [False], None),
    ],
)
def test_one_level_change_rule_no_data_decides_nothing(level, promotion, demotion, change):
    as_criteria = [lambda met: type("C", (), {"met": met})()]
    made = [as_criteria[0](m) for m in promotion], [as_criteria[0](m) for m in demotion]
    assert level_change(level, *made) == change


@pytest.mark.django_db
@pytest.mark.usefixtures("fresh_tallies")
def test_never_started_dispatches_are_no_jobs_and_do_not_demote_a_sound_backend(client):
    """Ascend in the sandbox: 3 dispatches never started beside 280 passing jobs (upstream's
    timeout rate counts jobs that timed out; a dispatch nobody answered is not a job there)."""
    l3_backend(passed=280, never_started=3)
    [repo] = client.get("/api/v1/level-status").json()["repos"]
    timeouts = next(c for c in repo["criteria"] if c["criterion"] == "timeout_rate")
    assert (timeouts["measured"], timeouts["met"], repo["change"]) == (0.0, True, None)
    pass_rate = next(c for c in repo["criteria"] if c["criterion"] == "pass_rate")
    assert pass_rate["measured"] == 1.0


@pytest.mark.django_db
@pytest.mark.usefixtures("fresh_tallies")
def test_a_backend_with_a_days_data_is_not_demoted_by_the_api_the_page_or_a_notification(client):
    l3_backend(passed=10, failed=30, first_hours_ago=20)
    [repo] = client.get("/api/v1/level-status").json()["repos"]
    assert repo["change"] is None and {c["met"] for c in repo["criteria"]} == {None}
    page = client.get("/crcr/Ascend/pytorch").content.decode()
    assert "not enough data yet" in page and "At risk of demotion" not in page
    readiness_events(timezone.now())
    assert not NotificationEvent.objects.filter(kind="at_risk").exists()
