"""GET /api/v1/level-status: upstream's level-status shape, plus the raw and upstream-adjusted
pass rates and the excused jobs; no data is listed, never demoted."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.models import FailedTest, JobRun, LevelChange
from tests.hud.test_selectors_summary import job, project

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]


def recent(hours: float = 2):
    return timezone.now() - timedelta(hours=hours)


def failing(proj, sha, classname, name):
    run = job(proj, "failure", sha=sha, at=recent(), tests_total=100, tests_failed=1)
    FailedTest.objects.create(job_run=run, classname=classname, name=name)


def jobs(proj, passed: int, shared: int = 0, own: int = 0, reference=None):
    """`shared` failures the reference fails too, `own` failures the reference passes."""
    for i in range(passed + shared + own):
        sha = f"{proj.pk:04x}{i:036x}"
        if i < passed:
            job(proj, "success", sha=sha, at=recent())
            continue
        failing(proj, sha, "TestFooPRIVATEUSE1", "test_add_npu_float32")
        if i < passed + shared:
            failing(reference, sha, "TestFooPRIVATEUSE1", "test_add_privateuse1_float32")
        else:
            job(reference, "success", sha=sha, at=recent(), tests_total=100)


@pytest.fixture
def reference():
    return project("pytorch/openreg-ci", is_reference=True, hardware_kind="reference")


def by_repo(api) -> dict:
    response = api.get("/api/v1/level-status")
    assert response.status_code == 200
    return {r["repo"]: r for r in response.json()["repos"]}


def criterion(repo: dict, name: str) -> dict:
    return next(c for c in repo["criteria"] if c["criterion"] == name)


def test_a_backend_failing_on_upstreams_breakage_is_not_demoted_and_says_why(api, reference):
    ascend = project("Ascend/pytorch", level="L3")
    jobs(ascend, passed=17, shared=3, reference=reference)  # raw 85 %, adjusted 100 %
    repo = by_repo(api)["Ascend/pytorch"]
    assert repo["change"] is None and repo["noData"] is False and repo["windowDays"] == 7
    rate = criterion(repo, "pass_rate")
    assert rate["raw"] == 0.85 and rate["adjusted"] == 1.0 and rate["decidedBy"] == "adjusted"
    assert rate["met"] is True and rate["measured"] == 1.0 and rate["target"] == 0.9
    assert [c["criterion"] for c in repo["criteria"]] == ["timeout_rate", "pass_rate", "e2e_p50"]
    [first, *_] = repo["passRate"]["excused"]
    assert first["reason"] == "baseline" and first["evidence"][0]["url"].startswith("/commit/")
    assert len(repo["passRate"]["excused"]) == 3


def test_a_backend_failing_on_its_own_is_demoted(api, reference):
    own = project("vendor/own-ci", level="L3")
    jobs(own, passed=17, own=3, reference=reference)
    repo = by_repo(api)["vendor/own-ci"]
    assert repo["change"] == "demote"
    assert criterion(repo, "pass_rate")["met"] is False and repo["passRate"]["excused"] == []
    assert repo["demotionPr"] is None  # until the demotion loop opens one (tests/checks/test_demotion.py)


def test_the_registry_can_make_the_raw_rate_decide(api, reference):
    ascend = project("Ascend/pytorch", level="L3", level_pass_rate="raw")
    jobs(ascend, passed=17, shared=3, reference=reference)
    repo = by_repo(api)["Ascend/pytorch"]
    assert repo["change"] == "demote" and criterion(repo, "pass_rate")["measured"] == 0.85


def test_exactly_ninety_percent_keeps_the_level(api, reference):
    edge = project("vendor/edge-ci", level="L4")
    jobs(edge, passed=9, own=1, reference=reference)
    assert by_repo(api)["vendor/edge-ci"]["change"] is None


def test_a_backend_without_jobs_in_the_window_is_listed_and_never_demoted(api, reference):
    project("vendor/quiet-ci", level="L3")
    repo = by_repo(api)["vendor/quiet-ci"]
    assert repo["noData"] is True and repo["change"] is None
    assert criterion(repo, "pass_rate")["met"] is None


def test_an_l2_backend_meeting_every_promotion_criterion_is_promoted_over_14_days(api, reference):
    l2 = project("vendor/ready-ci", level="L2")
    LevelChange.objects.create(
        project=l2, to_level="L2", changed_by="admin", changed_at=timezone.now() - timedelta(days=40)
    )
    jobs(l2, passed=20, reference=reference)
    JobRun.objects.filter(project=l2).update(queue_seconds=60, execution_seconds=600)
    job(l2, "success", sha="e" * 40, at=timezone.now() - timedelta(days=15))  # HUD data for 15 days
    repo = by_repo(api)["vendor/ready-ci"]
    assert repo["windowDays"] == 14 and repo["change"] == "promote"
    met = {c["criterion"]: c["met"] for c in repo["criteria"]}
    assert met == dict.fromkeys(
        ["queue_time_avg", "timeout_rate", "pass_rate", "e2e_p50", "overrun_rate", "tenure_days", "data_days"], True
    )
    assert criterion(repo, "tenure_days")["measured"] >= 40 and criterion(repo, "tenure_days")["target"] == 30
    assert repo["levelSince"] == repo["reportingSince"]  # the L2 entry 40 days ago
    assert repo["reportingSince"].startswith(str((timezone.now() - timedelta(days=40)).date()))


def test_an_l2_backend_short_of_tenure_is_not_promoted(api, reference):
    l2 = project("vendor/new-ci", level="L2")
    jobs(l2, passed=20, reference=reference)
    repo = by_repo(api)["vendor/new-ci"]
    assert repo["change"] is None and criterion(repo, "tenure_days")["met"] is False


def test_the_reference_and_l1_integrations_are_not_listed(api, reference):
    project("vendor/l1", level="L1")
    assert set(by_repo(api)) == set()


def test_one_repo_can_be_asked_for_and_a_bad_name_is_a_400(api, reference):
    project("Ascend/pytorch", level="L3")
    project("vendor/other", level="L3")
    body = api.get("/api/v1/level-status?repo=Ascend/pytorch").json()
    assert [r["repo"] for r in body["repos"]] == ["Ascend/pytorch"]
    assert api.get("/api/v1/level-status?repo=not a repo").status_code == 400
