"""The windowed tallies (the SQL translation of relay.results.status) and the /crcr summary."""

import random
import uuid
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from hud.selectors_summary import summary_build
from relay.health.healthz import HEARTBEAT_KEY
from relay.models import Delivery, Dispatch, JobRun, Project, RelayState
from relay.policy.verdicts import State, job_verdicts, rates
from relay.stats.windows import WINDOWS
from relay.tallies import buckets, histograms
from relay.tallies.buckets import Bucket, TalliesPending, bucket_compute
from relay.tallies.histograms import Histogram
from relay.tallies.rollups import window_tallies
from relay.tallies.tally import Tally

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]
NOW = timezone.now().replace(minute=30, second=0, microsecond=0)


# --- helpers, shared by the other summary-page test modules -----------------------------------------


def project(name: str | None = None, level: str = "L2", **extra) -> Project:
    name = name or f"vendor-{uuid.uuid4().hex[:8]}/pytorch-ci"
    return Project.objects.create(full_name=name, level=level, device="dev" if level == "L3" else "", **extra)


def job(
    proj: Project,
    conclusion: str = "success",
    *,
    sha: str = "a" * 40,
    name: str = "build",
    attempt: int = 1,
    at=None,
    status: str = "completed",
    ended_by: str = "",
    event_type: str = "pull_request",
    **extra,
) -> JobRun:
    at = at or NOW - timedelta(hours=2)
    fields = {
        "project": proj,
        "delivery_key": extra.pop("delivery_key", sha),
        "event_type": event_type,
        "run_id": extra.pop("run_id", "77"),
        "run_attempt": attempt,
        "job_name": name,
        "workflow_name": extra.pop("workflow_name", "ci"),
        "status": status,
        "conclusion": conclusion if status == "completed" else "",
        "ended_by": ended_by,
        "head_sha": sha,
        "pr_number": extra.pop("pr_number", 12 if event_type == "pull_request" else None),
        "created_at": at,
        "in_progress_at": at,
        "completed_at": at + timedelta(minutes=20) if status == "completed" else None,
        "queue_seconds": extra.pop("queue_seconds", 120.0),
        "execution_seconds": extra.pop("execution_seconds", 1200.0 if status == "completed" else None),
    }
    fields.update(extra)
    return JobRun.objects.create(**fields)


def tally_of(proj: Project, kind: str = "pr", days: int = 7, now=None) -> Tally:
    return window_tallies(days, now or NOW).get((proj.pk, kind)) or Tally()


# --- the policy in SQL ------------------------------------------------------------------------------


def test_it_counts_only_the_latest_attempt_of_a_job():
    backend = project()
    job(backend, "success", attempt=1, at=NOW - timedelta(hours=3))
    job(backend, "failure", attempt=2, at=NOW - timedelta(hours=2))
    tally = tally_of(backend)
    assert tally.verdicts == {State.FAILURE: 1}
    assert tally.rates.pass_rate == 0 and tally.rates.first_attempt_pass_rate == 1.0


def test_it_calls_a_pass_after_a_failed_attempt_flaky_and_still_a_pass():
    backend = project()
    job(backend, "failure", attempt=1, at=NOW - timedelta(hours=3))
    job(backend, "success", attempt=2, at=NOW - timedelta(hours=2))
    tally = tally_of(backend)
    assert tally.verdicts == {State.FLAKY: 1}
    assert tally.rates.pass_rate == 1.0 and tally.rates.first_attempt_pass_rate == 0.0


def test_it_counts_superseded_work_nowhere():
    backend = project()
    job(backend, "cancelled", ended_by="superseded")
    job(backend, "success", name="lint")
    assert tally_of(backend).rates.decided == 1


def test_a_timeout_is_an_infrastructure_failure_and_a_never_started_dispatch_is_no_job():
    backend = project()
    job(backend, "timed_out", ended_by="timed_out")
    job(backend, "success", name="other")
    job(backend, "timed_out", ended_by="never_started", name="", workflow_name="(no run started)", run_id="-")
    tally = tally_of(backend)
    assert (tally.timed_out, tally.never_started, tally.rates.infra, tally.rates.decided) == (1, 1, 1, 2)
    assert tally.rates.pass_rate == 0.5 and tally.timeout_rate == 0.5


def test_it_keeps_a_retry_that_crosses_midnight_in_one_verdict_on_the_first_day():
    backend = project()
    midnight = buckets._floor_day(NOW) - timedelta(days=2)
    job(backend, "failure", attempt=1, at=midnight - timedelta(minutes=30))
    job(backend, "success", attempt=2, at=midnight + timedelta(minutes=30))
    before = bucket_compute(Bucket(midnight - timedelta(days=1), midnight))[(backend.pk, "pr")]
    after = bucket_compute(Bucket(midnight, midnight + timedelta(days=1))).get((backend.pk, "pr"))
    assert before.verdicts == {State.FLAKY: 1}
    assert after is None or not after.verdicts


def test_it_matches_the_python_policy_on_a_random_mix_of_jobs():
    backend = project()
    jobs = _random_jobs(backend, random.Random(5), count=120)
    expected = rates(
        [v for sha in {j.head_sha for j in jobs} for v in job_verdicts([j for j in jobs if j.head_sha == sha])]
    )
    assert tally_of(backend).rates == expected


def _random_jobs(backend: Project, rng: random.Random, count: int) -> list:
    jobs = []
    outcomes = [
        ("success", ""),
        ("failure", ""),
        ("cancelled", ""),
        ("timed_out", "timed_out"),
        ("cancelled", "superseded"),
        ("neutral", ""),
        ("skipped", ""),
        ("stale", ""),
        ("action_required", ""),
    ]
    for i in range(count):
        sha, name = rng.choice("abc") * 40, rng.choice(["build", "test-1", "test-2", "lint"])
        attempt = 1 + sum(1 for j in jobs if j.head_sha == sha and j.job_name == name)
        conclusion, ended_by = rng.choice(outcomes)
        status = "in_progress" if rng.random() < 0.1 else "completed"
        jobs.append(
            job(
                backend,
                conclusion,
                sha=sha,
                name=name,
                attempt=attempt,
                status=status,
                ended_by=ended_by,
                at=NOW - timedelta(hours=5) + timedelta(seconds=i),
            )
        )
    return jobs


def test_it_keeps_timing_histograms_whose_quantiles_land_in_the_right_bin():
    backend = project()
    for i, seconds in enumerate([60, 120, 300, 600, 1800, 3600, 5400, 7200, 9000, 12000]):
        job(backend, name=f"j{i}", queue_seconds=seconds)
    queue = tally_of(backend).queue
    assert queue.n == 10 and queue.mean == pytest.approx(4008)
    assert 1800 <= queue.quantile(0.5) <= 3600
    assert 9000 <= queue.quantile(0.9) <= 10800


def test_it_reports_exact_shares_at_bin_edges():
    histogram = Histogram()
    histogram.add(histograms.EDGES.index(10800) + 1, 1, 11000)
    histogram.add(0, 99, 500)
    assert histogram.share_at_least(10800) == pytest.approx(0.01)
    assert Histogram().quantile(0.5) is None


def test_it_separates_pull_requests_nightlies_and_periodic_runs():
    backend = project()
    job(backend, "success", event_type="pull_request")
    job(backend, "failure", event_type="push", sha="b" * 40)
    job(backend, "failure", event_type="nightly", sha="c" * 40)
    job(backend, "success", event_type="periodic", sha="d" * 40)
    assert [tally_of(backend, kind).rates.decided for kind in ("pr", "nightly", "periodic")] == [2, 1, 1]


def test_it_answers_with_progress_when_the_time_budget_runs_out(monkeypatch):
    backend = project()
    job(backend, at=NOW - timedelta(hours=3))
    job(backend, sha="b" * 40, at=NOW - timedelta(hours=30))
    monkeypatch.setattr(buckets, "COMPUTE_BUDGET_SECONDS", -1)
    with pytest.raises(TalliesPending) as pending:
        window_tallies(7, NOW)
    assert pending.value.ready == 1 and pending.value.total > 1


# --- the summary --------------------------------------------------------------------------------------


def _row(result, proj):
    return next(row for section in result.sections for row in section.rows if row.project == proj)


def test_it_sorts_backends_worst_pass_rate_first_within_a_level():
    good, bad = project("good/ci"), project("bad/ci")
    job(good, "success")
    job(bad, "failure")
    section = summary_build("7d", "pr", NOW).sections[0]
    assert [row.project for row in section.rows] == [bad, good]


def test_it_keeps_the_health_probe_out_of_product_rows():
    probe = project("pytorch/crcr-test", is_health_probe=True)
    job(probe, "failure", name="test-xfail")
    result = summary_build("7d", "pr", NOW)
    assert all(row.project != probe for section in result.sections for row in section.rows)
    assert result.registered_total == 0


def test_it_leaves_nightly_only_repos_out_of_the_pull_request_tab_and_shows_them_in_the_nightly_one():
    both, nightly_only, pr_only = (
        project("both/ci"),
        project("TorchedHat/pytorch-redhat-ci", events=["nightly"]),
        project("pr/ci", events=["pull_request"]),
    )
    job(nightly_only, event_type="nightly", sha="b" * 40)

    def listed(tab):
        return {row.project for section in summary_build("7d", tab, NOW).sections for row in section.rows}

    assert listed("pr") == {both, pr_only}
    assert listed("nightly") == {both, nightly_only}
    assert _row(summary_build("7d", "nightly", NOW), nightly_only).rates.passed == 1


def test_it_says_in_words_when_a_backend_is_stale_or_has_no_data():
    stale, silent = project("stale/ci"), project("silent/ci")
    job(stale, at=NOW - timedelta(hours=30))
    result = summary_build("7d", "pr", NOW)
    assert _row(result, stale).activity == "stale" and "no result for" in _row(result, stale).activity_text
    assert _row(result, silent).activity == "no_data" and _row(result, silent).activity_text.startswith("No data")


def test_it_shows_l1_backends_as_dispatches_without_results():
    listener = project("listen/only", level="L1")
    delivery = Delivery.objects.create(
        guid="d1", event="pull_request", outcome="relayed", received_at=NOW - timedelta(hours=1)
    )
    Dispatch.objects.create(
        delivery=delivery,
        project=listener,
        state="sent",
        event_type="pull_request",
        created_at=NOW - timedelta(hours=1),
    )
    section = summary_build("7d", "pr", NOW).sections[0]
    assert section.level == "L1" and not section.rows
    assert (section.chips[0].project, section.chips[0].dispatched) == (listener, 1)


def _cards(result) -> dict:
    return {card.key: card for card in result.cards}


def test_it_calls_a_silent_relay_no_data_not_healthy():
    project()
    cards = _cards(summary_build("7d", "pr", NOW))
    assert {key: card.state for key, card in cards.items()} == dict.fromkeys(
        ("probe", "deliveries", "dispatch", "callbacks", "sweeper"), "no_data"
    )


def test_it_calls_a_relay_silent_past_its_staleness_window_degraded():
    Delivery.objects.create(guid="old", event="pull_request", outcome="relayed", received_at=NOW - timedelta(hours=3))
    cards = _cards(summary_build("7d", "pr", NOW))
    assert cards["deliveries"].state == "degraded" and "stale after" in cards["deliveries"].freshness


def test_it_calls_fresh_deliveries_healthy():
    Delivery.objects.create(guid="new", event="pull_request", outcome="relayed", received_at=NOW - timedelta(minutes=5))
    assert _cards(summary_build("7d", "pr", NOW))["deliveries"].state == "healthy"


def test_it_calls_the_sweeper_degraded_when_jobs_are_overdue_even_with_a_heartbeat():
    RelayState.objects.create(key=HEARTBEAT_KEY, value={})
    job(project(), status="in_progress", at=timezone.now() - timedelta(hours=7))
    card = _cards(summary_build("7d", "pr", timezone.now()))["sweeper"]
    assert card.state == "degraded" and card.headline == "1 stuck past the 6 h timeout"


def test_a_job_overdue_within_the_timeout_leaves_the_sweeper_healthy_and_its_headline_says_so():
    """It read "Healthy · 1 overdue": the headline now is what the state is judged by."""
    RelayState.objects.create(key=HEARTBEAT_KEY, value={})
    job(project(), status="in_progress", at=timezone.now() - timedelta(hours=4))  # past the 3 h expected, within 6 h
    card = _cards(summary_build("7d", "pr", timezone.now()))["sweeper"]
    assert (card.state, card.headline) == ("healthy", "none stuck")
    assert card.detail.startswith("1 running past its expected duration, within the timeout")


def test_a_probe_whose_heads_are_all_still_running_is_no_data_not_degraded():
    """/crcr opened on a red "Relay health probe: Degraded" while the probe's first runs ran."""
    now = timezone.now()
    probe = project("pytorch/crcr-test", is_health_probe=True)
    job(probe, name="smoke", status="in_progress", at=now - timedelta(minutes=3))
    card = _cards(summary_build("7d", "pr", now))["probe"]
    assert (card.state, card.headline) == ("no_data", "No head decided yet") and "1 running" in card.detail


@pytest.mark.parametrize(("minutes", "state"), [(384, "healthy"), (386, "degraded")])
def test_it_calls_the_probe_degraded_once_a_job_is_in_progress_past_385_minutes(minutes, state):
    now = timezone.now()
    probe = project("pytorch/crcr-test", is_health_probe=True)
    job(probe, "success", name="smoke", at=now - timedelta(hours=1))
    job(probe, name="hung", sha="b" * 40, status="in_progress", at=now - timedelta(minutes=minutes))
    card = _cards(summary_build("7d", "pr", now))["probe"]
    assert card.state == state and ("stuck in progress" in card.headline) == (state == "degraded")


def test_it_offers_1_7_14_30_and_90_days_and_counts_each_range_by_its_days():
    assert [w.days for w in WINDOWS.values()] == [1, 7, 14, 30, 90]
    backend = project()
    job(backend, "failure", sha="c" * 40, at=NOW - timedelta(days=60))
    job(backend, "success", at=NOW - timedelta(days=10))
    assert [tally_of(backend, days=d).rates.decided for d in (7, 14, 30, 90)] == [0, 1, 1, 2]


def test_it_passes_the_probe_only_on_the_conclusions_its_jobs_expect():
    probe = project("pytorch/crcr-test", is_health_probe=True)
    job(probe, "failure", name="test-xfail", at=NOW - timedelta(hours=1))
    job(probe, "cancelled", name="test-xcancel", at=NOW - timedelta(hours=1))
    job(probe, "timed_out", name="test-xtimeout", at=NOW - timedelta(hours=1))
    job(probe, "success", name="smoke", at=NOW - timedelta(hours=1))
    assert _cards(summary_build("7d", "pr", NOW))["probe"].state == "healthy"
    job(probe, "success", name="test-xcancel-2", at=NOW - timedelta(minutes=50))
    cache.clear()
    assert _cards(summary_build("7d", "pr", NOW))["probe"].state == "degraded"


def test_it_caches_hot_buckets_for_minutes_and_settled_ones_for_a_day():
    hour = buckets._floor_hour(NOW)
    newest, older = (
        Bucket(hour, hour + timedelta(hours=1)),
        Bucket(hour - timedelta(hours=5), hour - timedelta(hours=4)),
    )
    settled = Bucket(hour - timedelta(days=5), hour - timedelta(days=4))
    assert 60 <= buckets._bucket_ttl(newest, NOW) <= 75
    assert 120 <= buckets._bucket_ttl(older, NOW) <= 255
    assert buckets._bucket_ttl(settled, NOW) == 24 * 3600
