"""GitHub's secondary rate limits: writes as one installation share a token bucket (in Redis when
there is one, else per process); a send that finds it short is deferred by the outbox engine,
with the delay on the row and no attempt spent, and sent later."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from relay import tasks
from relay.dispatch import sending as dispatching
from relay.github import installations, ratelimit
from relay.models import Dispatch, DispatchAttempt
from tests.conftest import fixture_payload
from tests.factories import DeliveryFactory, DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db
INSTALLATION = 11


@pytest.fixture
def small_budget(settings):
    """Two writes' worth of points, refilled at one point a second."""
    settings.GITHUB_WRITE_POINTS, settings.GITHUB_WRITE_BURST_POINTS = 5, 10
    settings.GITHUB_WRITE_POINTS_PER_MINUTE = 10 + 60
    settings.GITHUB_API_URL = f"http://budget-{time.time_ns()}.invalid"  # a bucket of its own
    ratelimit.local_buckets_reset()
    return settings


@pytest.fixture
def fan_out(standin, db):
    """A PR delivery with one pending dispatch per repo of one installation: `fan_out(n)`."""
    standin.add_installation(installation_id=INSTALLATION, account="intel")
    ratelimit.local_buckets_reset()

    def make(n: int) -> list[Dispatch]:
        payload = fixture_payload("pull_request.opened")
        delivery = DeliveryFactory(payload=payload, pr_number=2, head_sha=payload["pull_request"]["head"]["sha"])
        rows = []
        for i in range(n):
            name = f"intel/backend-{i}"
            standin.add_repo(name, repo_id=500 + i, installation_id=INSTALLATION)
            rows.append(
                DispatchFactory(delivery=delivery, project=ProjectFactory(full_name=name, github_repo_id=500 + i))
            )
            installations.installation_remember(name, INSTALLATION)  # as the hourly sync records it
        return rows

    return make


def test_the_bucket_spends_its_burst_then_refills_at_its_rate(small_budget):
    now = 1_000_000.0
    assert ratelimit.write_take(1, now) == 0.0
    assert ratelimit.write_take(1, now) == 0.0
    assert ratelimit.write_take(1, now) == pytest.approx(5.0), "5 points missing at 1 point a second"
    assert ratelimit.write_take(1, now + 5) == 0.0, "refilled after those 5 seconds"


def test_writes_deferred_together_are_told_successive_times(small_budget):
    now = 2_000_000.0
    ratelimit.write_take(2, now), ratelimit.write_take(2, now)
    waits = [ratelimit.write_take(2, now) for _ in range(3)]
    assert waits == [pytest.approx(5.0), pytest.approx(10.0), pytest.approx(15.0)]


def test_each_installation_has_its_own_bucket(small_budget):
    now = 3_000_000.0
    ratelimit.write_take(3, now), ratelimit.write_take(3, now)
    assert ratelimit.write_take(3, now) > 0
    assert ratelimit.write_take(4, now) == 0.0


def test_no_minute_sees_more_than_the_per_minute_points(settings):
    settings.GITHUB_API_URL = f"http://minute-{time.time_ns()}.invalid"
    ratelimit.local_buckets_reset()
    start = 4_000_000.0
    granted = sum(ratelimit.write_take(5, start + second) == 0.0 for second in range(60) for _ in range(10))
    assert granted * settings.GITHUB_WRITE_POINTS <= settings.GITHUB_WRITE_POINTS_PER_MINUTE


def test_a_burst_beyond_the_bucket_is_deferred_not_lost(
    small_budget, fan_out, standin, monkeypatch, django_capture_on_commit_callbacks
):
    kicks = []
    monkeypatch.setattr(tasks.dispatch_send_task, "apply_async", lambda args, countdown=0.0: kicks.append(countdown))
    rows = fan_out(4)
    with django_capture_on_commit_callbacks(execute=True):
        states = [dispatching.dispatch_send(row.pk) for row in rows]
    assert states == ["sent", "sent", "retrying", "retrying"]
    deferred = Dispatch.objects.filter(state="retrying")
    assert {row.attempts for row in deferred} == {0}, "no attempt spent"
    assert not DispatchAttempt.objects.filter(dispatch__in=deferred).exists()
    assert all(row.next_attempt_at > timezone.now() and "write budget" in row.last_error for row in deferred)
    assert len(kicks) == 2 and 0 < kicks[0] < kicks[1] <= 15, "each kicked again when its points will be there"

    later = time.time() + 20
    monkeypatch.setattr(ratelimit.time, "time", lambda: later)
    deferred.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert [dispatching.dispatch_send(row.pk) for row in rows[2:]] == ["sent", "sent"]
    assert len(standin.dispatches) == 4


def test_the_fan_out_of_a_normal_delivery_is_not_slowed(settings, fan_out, standin):
    settings.GITHUB_API_URL = standin.url
    rows = fan_out(50)
    assert [dispatching.dispatch_send(row.pk) for row in rows] == ["sent"] * 50
    assert len(standin.dispatches) == 50


def test_reads_take_nothing_from_the_budget(small_budget):
    for _ in range(5):
        ratelimit.write_budget_check(6, "GET")
    ratelimit.write_budget_check(6, "POST")
