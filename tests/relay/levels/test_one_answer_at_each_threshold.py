"""One answer per backend at every demotion threshold: on each side of the boundary (`≥ 90 %` pass
rate, `< 1 %` timeouts, 20 jobs of sample) the summary page's chip, the backend page, the
level-status API, the at-risk notification and the demotion loop say the same thing, because
they all read relay.levels' one level_change rule."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from relay.levels.events import readiness_events
from relay.levels.tasks import demotion_prs_reconcile
from relay.models import DemotionDecision, NotificationEvent
from tests.hud.test_selectors_summary import job, project

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies", "production_sample")]


@pytest.fixture
def production_sample(settings):
    settings.CRCR_LEVEL_MIN_JOBS, settings.CRCR_LEVEL_MIN_DATA_HOURS = 20, 72


def l3_backend(passed: int, failed: int = 0, timed_out: int = 0):
    """An L3 backend reporting for four days: `passed`, `failed` and `timed_out` jobs in the last hour."""
    now = timezone.now()
    ascend = project("Ascend/pytorch", level="L3")
    job(ascend, "success", sha="f" * 40, at=now - timedelta(hours=96))
    outcomes = ["success"] * (passed - 1) + ["failure"] * failed + ["timed_out"] * timed_out
    for i, conclusion in enumerate(outcomes):  # GitHub's own conclusions, timed_out among them
        job(ascend, conclusion, sha=f"{i:040x}", at=now - timedelta(hours=1))
    return ascend


def answers(client) -> dict:
    """What each place says about the one backend: demote or not."""
    [repo] = client.get("/api/v1/level-status").json()["repos"]
    backend_page = client.get("/crcr/Ascend/pytorch").content.decode()
    cache.clear()  # the summary chip is shared for a minute; read it afresh
    summary = client.get("/crcr").content.decode()
    readiness_events(timezone.now())
    demotion_prs_reconcile()
    return {
        "api": repo["change"] == "demote",
        "backend page": "At risk of demotion" in backend_page,
        "summary chip": "readiness-chip bad" in summary,
        "notification": NotificationEvent.objects.filter(kind="at_risk").exists(),
        "loop": DemotionDecision.objects.filter(kind=DemotionDecision.Kind.OPENED).exists(),
    }


@pytest.mark.parametrize(
    "passed, failed, timed_out, demote",
    [
        pytest.param(27, 3, 0, False, id="pass rate exactly 90 % keeps the level"),
        pytest.param(26, 3, 0, True, id="pass rate 89.7 % is at risk"),
        pytest.param(99, 0, 1, True, id="timeouts exactly 1 % are at risk"),
        pytest.param(100, 0, 1, False, id="timeouts 0.99 % keep the level"),
        pytest.param(10, 9, 0, False, id="19 jobs are too few to judge"),
        pytest.param(11, 9, 0, True, id="20 jobs are enough to judge"),
    ],
)
def test_every_place_gives_the_same_answer_on_each_side_of_the_threshold(client, passed, failed, timed_out, demote):
    l3_backend(passed, failed, timed_out)
    said = answers(client)
    assert said == dict.fromkeys(said, demote)
