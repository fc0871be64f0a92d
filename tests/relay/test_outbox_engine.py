"""The one outbox engine both kinds go through: its own retry settings per kind, one kick rule,
one policy for unexpected errors and for a claim a unique constraint refuses."""

from datetime import timedelta

import pytest
from django.db import IntegrityError
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from relay import tasks
from relay.checks import outbox
from relay.dispatch import sending as dispatching
from relay.models import Dispatch, UpstreamCheckRun, UpstreamWrite
from relay.outbox.engine import KICK_COUNTDOWN_LIMIT_SECONDS, Deferred, Outbox, retry_countdown
from tests.conftest import fixture_payload
from tests.factories import DeliveryFactory, DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db
REPO = "intel/torch-xpu-ops"


@pytest.fixture
def installed(standin):
    standin.add_installation(installation_id=11, account="intel")
    standin.add_repo(REPO, repo_id=123, installation_id=11)
    return standin


@pytest.fixture
def dispatch(db):
    payload = fixture_payload("pull_request.opened")
    delivery = DeliveryFactory(payload=payload, pr_number=2, head_sha=payload["pull_request"]["head"]["sha"])
    return DispatchFactory(delivery=delivery, project=ProjectFactory(full_name=REPO, github_repo_id=123))


@pytest.fixture
def write(db):
    row = UpstreamCheckRun.objects.create(kind="gate", name="crcr/gate", head_sha="a" * 40, pr_number=2)
    return UpstreamWrite.objects.create(
        kind=UpstreamWrite.Kind.CHECK_RUN_CREATE, target_key=f"check_run:{row.pk}", check_run=row
    )


def test_dispatches_and_upstream_writes_are_two_kinds_of_one_engine():
    assert isinstance(dispatching.DISPATCHES, Outbox) and isinstance(outbox.WRITES, Outbox)
    for name in ("claim", "send", "record", "due", "retry_delay", "kick"):
        assert name not in vars(type(dispatching.DISPATCHES)) and name not in vars(type(outbox.WRITES)), name


def test_each_kind_backs_off_by_its_own_settings(settings):
    settings.CRCR_DISPATCH_BACKOFF_BASE_SECONDS, settings.CRCR_DISPATCH_BACKOFF_MAX_SECONDS = 100, 100
    settings.CRCR_UPSTREAM_WRITE_BACKOFF_BASE_SECONDS, settings.CRCR_UPSTREAM_WRITE_BACKOFF_MAX_SECONDS = 2, 2
    assert 50 <= dispatching.DISPATCHES.retry_delay(3) <= 100
    assert 1 <= outbox.WRITES.retry_delay(3) <= 2


def test_dispatch_settings_no_longer_govern_upstream_writes(write, settings, monkeypatch):
    settings.CRCR_DISPATCH_MAX_ATTEMPTS, settings.CRCR_UPSTREAM_WRITE_MAX_ATTEMPTS = 1, 3
    transient = outbox.Result(outbox.Outcome.TRANSIENT, 502, "GitHub 502")
    monkeypatch.setattr(outbox.WRITES, "attempt", lambda row: transient)
    assert outbox.write_send(write.pk) == "retrying"
    UpstreamWrite.objects.filter(pk=write.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert outbox.write_send(write.pk) == "retrying"
    UpstreamWrite.objects.filter(pk=write.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert outbox.write_send(write.pk) == "failed"


def test_the_lease_is_per_kind(dispatch, write, settings):
    settings.CRCR_DISPATCH_LEASE_SECONDS, settings.CRCR_UPSTREAM_WRITE_LEASE_SECONDS = 600, 5
    before = timezone.now()
    assert dispatching.dispatch_claim(dispatch.pk).lease_expires_at >= before + timedelta(seconds=590)
    assert outbox.write_claim(write.pk).lease_expires_at <= timezone.now() + timedelta(seconds=5)


def test_a_short_dispatch_retry_is_kicked_once_with_a_countdown_after_commit(
    installed, dispatch, monkeypatch, django_capture_on_commit_callbacks
):
    kicks = []
    monkeypatch.setattr(
        tasks.dispatch_send_task, "apply_async", lambda args, countdown=0.0: kicks.append((args, countdown))
    )
    installed.fail("POST", rf"/repos/{REPO}/dispatches", status=502)
    with django_capture_on_commit_callbacks(execute=True):
        assert dispatching.dispatch_send(dispatch.pk) == "retrying"
        assert kicks == [], "not before the attempt is committed"
    [(args, countdown)] = kicks
    assert args == [dispatch.pk] and 0 < countdown <= KICK_COUNTDOWN_LIMIT_SECONDS


def test_a_long_retry_waits_for_the_sweeper(installed, dispatch, monkeypatch, django_capture_on_commit_callbacks):
    kicks = []
    monkeypatch.setattr(tasks.dispatch_send_task, "apply_async", lambda args, countdown=0.0: kicks.append(args))
    installed.fail("POST", rf"/repos/{REPO}/dispatches", status=429, retry_after=300)
    with django_capture_on_commit_callbacks(execute=True):
        assert dispatching.dispatch_send(dispatch.pk) == "retrying"
    assert kicks == []


def test_a_deferred_send_spends_no_attempt_and_goes_again_when_told(
    write, monkeypatch, django_capture_on_commit_callbacks
):
    kicks = []
    monkeypatch.setattr(tasks.upstream_write_send, "apply_async", lambda args, countdown=0.0: kicks.append(countdown))

    def budget_spent(row):
        raise Deferred("waiting for the write budget", 12.0)

    monkeypatch.setattr(outbox.WRITES, "attempt", budget_spent)
    with django_capture_on_commit_callbacks(execute=True):
        assert outbox.write_send(write.pk) == "retrying"
    write.refresh_from_db()
    assert (write.attempts, write.attempt_log.count(), write.lease_expires_at) == (0, 0, None)
    assert write.last_error == "waiting for the write budget"
    assert timezone.now() + timedelta(seconds=10) < write.next_attempt_at <= timezone.now() + timedelta(seconds=12)
    assert kicks == [pytest.approx(12.0, abs=1.0)]


def test_the_kick_rule_is_short_retries_only():
    soon, later = (
        timezone.now() + timedelta(seconds=10),
        timezone.now() + timedelta(seconds=KICK_COUNTDOWN_LIMIT_SECONDS + 5),
    )
    assert 9 <= retry_countdown("retrying", soon) <= 10
    assert retry_countdown("retrying", later) is None and retry_countdown("sent", None) is None


def test_a_broker_outage_at_kick_time_leaves_the_row_to_the_sweeper(dispatch, monkeypatch, caplog):
    def down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(tasks.dispatch_send_task, "apply_async", down)
    dispatching.DISPATCHES.kick(dispatch.pk)
    assert "the sweeper will send it" in caplog.text


def test_an_unexpected_error_in_a_dispatch_is_recorded_and_ends_visibly(installed, dispatch, settings, monkeypatch):
    settings.CRCR_DISPATCH_MAX_ATTEMPTS = 2

    def vanished(dispatch):
        raise LookupError("delivery vanished")

    monkeypatch.setattr(dispatching, "dispatch_client_payload", vanished)
    assert dispatching.dispatch_send(dispatch.pk) == "retrying"
    row = Dispatch.objects.get(pk=dispatch.pk)
    assert (row.last_error, row.lease_expires_at) == ("LookupError: delivery vanished", None)
    Dispatch.objects.filter(pk=dispatch.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    assert dispatching.dispatch_send(dispatch.pk) == "failed"
    assert list(row.attempt_log.values_list("outcome", flat=True)) == ["transient", "transient"]


def test_a_claim_a_unique_constraint_refuses_is_lost_and_the_row_stays_due(dispatch, monkeypatch):
    """For every kind: another send to the same target is in flight, so this one waits."""
    execute = CursorWrapper.execute

    def refused(cursor, sql, params=None):
        if sql.startswith("UPDATE") and "SET state = 'sending'" in sql:
            raise IntegrityError("one sending per target")
        return execute(cursor, sql, params)

    monkeypatch.setattr(CursorWrapper, "execute", refused)
    assert dispatching.dispatch_claim(dispatch.pk) is None
    monkeypatch.undo()
    assert Dispatch.objects.get(pk=dispatch.pk).state == "pending"
    assert dispatching.dispatch_claim(dispatch.pk) is not None
