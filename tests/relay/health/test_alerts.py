"""The relay's health alerts (relay/health/alerts.py) over the probe's figures (relay/health/probe.py): each of
upstream's three rules at its boundary, retries deduplicated by the latest attempt per (run_id,
job_name), one episode per firing with one event each way, and the state /crcr shows."""

from datetime import timedelta

import pytest
from django.db import IntegrityError
from django.utils import timezone

from relay.health import probe as figures
from relay.health.alerts import alert_statuses, alerts_evaluate, episode_fire, readings
from relay.models import AlertEpisode, JobRun, NotificationEvent, Project

pytestmark = pytest.mark.django_db
Rule = AlertEpisode.Rule


@pytest.fixture
def probe():
    return Project.objects.create(
        full_name="pytorch/crcr-test", level="L2", is_health_probe=True, hardware_kind="probe", github_repo_id=9
    )


def job(probe, at, *, event="nightly", name="smoke", conclusion="success", run="1", attempt=1, pr=None, **extra):
    fields = {
        "project": probe,
        "delivery_key": f"{event}-{run}-{pr}",
        "event_type": event,
        "run_id": run,
        "run_attempt": attempt,
        "workflow_name": "crcr",
        "job_name": name,
        "status": JobRun.Status.COMPLETED,
        "conclusion": conclusion,
        "head_sha": "ab" * 20,
        "pr_number": pr,
        "created_at": at,
        "completed_at": at,
    }
    fields.update(extra)
    return JobRun.objects.create(**fields)


def reading(rule, now):
    return next(r for r in readings(now) if r.rule == rule)


# --- rule 1 ---------------------------------------------------------------------------------------


def test_an_x_probe_ending_as_built_is_expected_and_any_other_ending_is_not(probe):
    now = timezone.now()
    job(probe, now, name="xfail", conclusion="failure")
    job(probe, now, name="xcancel", conclusion="cancelled")
    job(probe, now, name="xtimeout", conclusion="timed_out")
    assert not reading(Rule.PROBE_NIGHTLY_UNEXPECTED, now).firing
    job(probe, now, name="xfail-but-passed", conclusion="success", run="2")
    found = reading(Rule.PROBE_NIGHTLY_UNEXPECTED, now)
    assert found.firing and found.value == 1 and "xfail-but-passed: success" in found.summary


def test_a_retry_that_passed_replaces_the_failed_attempt_of_the_same_run_and_job(probe):
    now = timezone.now()
    job(probe, now - timedelta(minutes=30), name="smoke", conclusion="failure", run="7", attempt=1)
    job(probe, now, name="smoke", conclusion="success", run="7", attempt=2)
    assert reading(Rule.PROBE_NIGHTLY_UNEXPECTED, now).value == 0


def test_only_the_last_24_hours_of_nightly_outcomes_count_and_pr_jobs_never(probe):
    now = timezone.now()
    job(probe, now - timedelta(hours=24, minutes=1), conclusion="failure", run="old")
    job(probe, now, event="pull_request", conclusion="failure", run="pr", pr=5)
    assert reading(Rule.PROBE_NIGHTLY_UNEXPECTED, now).value == 0
    job(probe, now - timedelta(hours=23, minutes=59), conclusion="failure", run="new")
    assert reading(Rule.PROBE_NIGHTLY_UNEXPECTED, now).value == 1


# --- rule 2 ---------------------------------------------------------------------------------------


def prs(probe, now, failing: set, count=20):
    for n in range(1, count + 1):
        job(probe, now - timedelta(minutes=count - n), event="pull_request", run=f"r{n}", pr=n)
        job(
            probe,
            now - timedelta(minutes=count - n),
            event="pull_request",
            name="xfail",
            run=f"r{n}",
            pr=n,
            conclusion="success" if n in failing else "failure",
        )


def test_one_failing_pr_of_twenty_is_exactly_the_95_percent_boundary_and_does_not_fire(probe):
    now = timezone.now()
    prs(probe, now, failing={3})
    found = reading(Rule.PROBE_PR_PASS_RATE, now)
    assert found.value == pytest.approx(0.95) and not found.firing


def test_two_failing_prs_of_the_last_twenty_fire(probe):
    now = timezone.now()
    prs(probe, now, failing={3, 17})
    found = reading(Rule.PROBE_PR_PASS_RATE, now)
    assert found.value == pytest.approx(0.90) and found.firing and "#3" in found.summary and "#17" in found.summary


def test_the_window_is_the_last_twenty_prs_however_old_not_a_time_window(probe):
    now = timezone.now()
    prs(probe, now - timedelta(days=9), failing={1, 2}, count=22)  # the two failures are the oldest
    found = reading(Rule.PROBE_PR_PASS_RATE, now)
    assert found.value == 1.0 and len(figures.pr_pass_rate(probe, 20).prs) == 20


def test_a_pr_still_running_is_not_counted_until_its_jobs_are_decided(probe):
    now = timezone.now()
    prs(probe, now, failing=set(), count=19)
    job(probe, now, event="pull_request", run="r99", pr=99, status=JobRun.Status.IN_PROGRESS, conclusion="")
    assert [pr.number for pr in figures.pr_pass_rate(probe, 20).prs][0] == 19


def test_no_relayed_pr_is_no_data_which_does_not_fire_this_rule(probe):
    found = reading(Rule.PROBE_PR_PASS_RATE, timezone.now())
    assert (found.value, found.firing) == (None, False)


# --- rule 3 ---------------------------------------------------------------------------------------


def test_thirty_hours_of_nightly_silence_is_the_boundary(probe):
    now = timezone.now()
    job(probe, now - timedelta(hours=30))
    assert not reading(Rule.PROBE_NIGHTLY_SILENT, now).firing
    assert reading(Rule.PROBE_NIGHTLY_SILENT, now + timedelta(seconds=1)).firing


def test_no_nightly_probe_ever_completed_fires_and_a_job_the_sweeper_ended_did_not_complete(probe):
    now = timezone.now()
    job(probe, now, conclusion="timed_out", ended_by=JobRun.EndedBy.TIMED_OUT)
    found = reading(Rule.PROBE_NIGHTLY_SILENT, now)
    assert found.firing and found.value is None and "ever completed" in found.summary


def test_thresholds_and_windows_come_from_settings(probe, settings):
    settings.CRCR_ALERT_SILENT_HOURS = 2
    settings.CRCR_ALERT_PASS_RATE_MIN = 0.85
    now = timezone.now()
    job(probe, now - timedelta(hours=3))
    prs(probe, now, failing={3, 17})
    assert reading(Rule.PROBE_NIGHTLY_SILENT, now).firing
    assert not reading(Rule.PROBE_PR_PASS_RATE, now).firing


# --- episodes -------------------------------------------------------------------------------------


def test_a_rule_fires_once_per_episode_and_resolves_once_when_it_clears(probe):
    now = timezone.now()
    job(probe, now)
    alerts_evaluate(now + timedelta(hours=31))
    alerts_evaluate(now + timedelta(hours=32))
    [episode] = AlertEpisode.objects.filter(rule=Rule.PROBE_NIGHTLY_SILENT)
    assert episode.started_at == now + timedelta(hours=31) and episode.resolved_at is None
    assert episode.last_seen_at == now + timedelta(hours=32)
    job(probe, now + timedelta(hours=33), run="2")
    alerts_evaluate(now + timedelta(hours=33))
    alerts_evaluate(now + timedelta(hours=34))
    episode.refresh_from_db()
    assert episode.resolved_at == now + timedelta(hours=33)
    kinds = list(NotificationEvent.objects.order_by("id").values_list("kind", flat=True))
    assert kinds == ["health_degraded", "health_recovered"]
    alerts_evaluate(now + timedelta(hours=70))
    assert AlertEpisode.objects.filter(rule=Rule.PROBE_NIGHTLY_SILENT).count() == 2


def test_the_database_refuses_a_second_open_episode_of_a_rule(probe):
    AlertEpisode.objects.create(rule=Rule.PROBE_NIGHTLY_SILENT, summary="a")
    with pytest.raises(IntegrityError):
        AlertEpisode.objects.create(rule=Rule.PROBE_NIGHTLY_SILENT, summary="b")


def test_an_episode_opened_meanwhile_by_another_evaluation_is_not_announced_again(probe, monkeypatch):
    now = timezone.now()
    [silent] = [r for r in readings(now) if r.rule == Rule.PROBE_NIGHTLY_SILENT]
    AlertEpisode.objects.create(rule=silent.rule, summary="opened elsewhere")
    # As if this evaluation had looked before the other one committed: its UPDATE found nothing.
    monkeypatch.setattr(AlertEpisode.objects, "filter", lambda **kw: AlertEpisode.objects.none())
    assert episode_fire(silent, now) is None
    monkeypatch.undo()
    assert NotificationEvent.objects.count() == 0 and AlertEpisode.objects.count() == 1


def test_crcr_shows_each_rule_with_since_when_it_fires(probe):
    now = timezone.now()
    assert {s.state for s in alert_statuses()} == {"not_evaluated"}
    job(probe, now - timedelta(hours=40))
    alerts_evaluate(now)
    statuses = {s.rule: s for s in alert_statuses()}
    assert statuses[Rule.PROBE_NIGHTLY_SILENT].state == "firing"
    assert statuses[Rule.PROBE_NIGHTLY_SILENT].since == now
    assert statuses[Rule.PROBE_NIGHTLY_UNEXPECTED].state == "ok"
    assert statuses[Rule.PROBE_PR_PASS_RATE].state == "no_data"


def test_the_probe_card_answers_its_own_window_and_the_alert_its_own(probe):
    """The sandbox showed a green "All passing · 3/3 recent heads" beside "Probe pass rate: firing"
    (two PRs of the last nine had failed), then a card reading "Degraded · Alert firing · 3/3 recent
    heads passed": two windows on one card. The card now names its window, the last heads, and
    its state is theirs; the alert, over its twenty PRs, fires in its own panel."""
    from hud.health import probe_card

    now = timezone.now()
    for n in range(1, 21):
        at, sha = now - timedelta(minutes=21 - n), f"{n:040x}"
        job(probe, at, event="pull_request", run=f"r{n}", pr=n, head_sha=sha)
        job(probe, at, event="pull_request", name="xfail", run=f"r{n}", pr=n, head_sha=sha, conclusion="failure")
        if n in (3, 5):  # an x-probe that passed: not as built
            JobRun.objects.filter(run_id=f"r{n}", job_name="xfail").update(conclusion="success")
    alerts_evaluate(now)
    card = probe_card(probe, "pr", timedelta(days=1), now)
    assert (card.state, card.headline) == ("healthy", "5 of the last 5 heads passed")
    assert "alert" not in card.detail.lower()
    assert {s.rule: s.state for s in alert_statuses()}[Rule.PROBE_PR_PASS_RATE] == "firing"
