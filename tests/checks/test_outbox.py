"""The outbox every upstream write goes through: durable rows, claims, coalescing, sorted
failures with stored backoff, adoption of a create whose answer was lost, the sweeper, the page."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from relay.checks import checkruns, outbox
from relay.checks.checkruns import gate_check_run_refresh
from relay.github import writes
from relay.models import UpstreamCheckRun, UpstreamWrite

from .conftest import HEAD

pytestmark = pytest.mark.django_db
GATE_PATH = r"/repos/pytorch/pytorch/check-runs"


@pytest.fixture
def gate_row(relay):
    """A PR's gate with one unsent create (no L4 backend: no other writes around)."""
    relay.pr("opened")
    return UpstreamCheckRun.objects.get(name="crcr/gate")


def unsent(row) -> list[UpstreamWrite]:
    return list(row.writes.filter(state__in=UpstreamWrite.UNSENT_STATES))


def test_a_newer_change_supersedes_the_unsent_write_for_the_same_check_run(gate_row):
    first = gate_row.writes.get()
    second = writes.write_enqueue(first.kind, first.target_key, check_run=gate_row)
    first.refresh_from_db()
    assert (first.state, second.state) == ("superseded", "pending")
    assert unsent(gate_row) == [second]


def test_a_superseded_retrying_write_keeps_its_backoff(relay, gate_row):
    relay.gh.fail("POST", GATE_PATH, status=429, retry_after=120)
    relay.drain()
    waiting = gate_row.writes.get(state="retrying")
    newer = writes.write_enqueue(waiting.kind, waiting.target_key, check_run=gate_row)
    assert newer.next_attempt_at == waiting.next_attempt_at >= timezone.now() + timedelta(seconds=110)


def test_exactly_one_of_two_concurrent_senders_claims_a_write(gate_row):
    write = gate_row.writes.get()
    assert sum(outbox.write_claim(write.pk) is not None for _ in range(2)) == 1


def test_a_worker_killed_mid_send_is_resent_after_its_lease(relay, gate_row):
    write = gate_row.writes.get()
    assert outbox.write_claim(write.pk) is not None  # the worker dies holding it
    assert outbox.write_send(write.pk) is None
    UpstreamWrite.objects.filter(pk=write.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert write.pk in outbox.writes_due(10)
    assert outbox.write_send(write.pk) == "sent"
    assert relay.check_run("crcr/gate")["conclusion"] == "success"


def test_a_422_fails_for_good_and_stays_visible(relay, gate_row):
    relay.gh.fail("POST", GATE_PATH, status=422, body={"message": "Invalid request."})
    relay.drain()
    write = gate_row.writes.get()
    assert write.state == "failed" and "422" in write.last_error
    relay.make_due()
    assert relay.drain() == 0


def test_it_gives_up_after_the_last_attempt(relay, gate_row, settings):
    settings.CRCR_UPSTREAM_WRITE_MAX_ATTEMPTS = 2
    relay.gh.fail("POST", GATE_PATH, status=503, times=None)
    relay.drain()
    relay.make_due()
    relay.drain()
    assert list(gate_row.writes.get().attempt_log.values_list("outcome", flat=True)) == ["transient", "transient"]
    assert gate_row.writes.get().state == "failed"


def test_a_create_whose_answer_was_lost_is_found_again_not_duplicated(relay, gate_row, settings):
    from relay.github import client as github

    settings.GITHUB_HTTP_TIMEOUT = 0.3
    github.reset_http_client()
    relay.gh.fail("POST", GATE_PATH, status=None, delay=0.8)
    relay.drain()
    assert gate_row.writes.get().state == "retrying"
    assert relay.gh.wait_for(lambda gh: len(gh.check_runs) == 1), "GitHub made it; the relay never heard"
    time.sleep(0.1)
    relay.make_due()
    relay.drain()
    [run] = relay.check_runs("crcr/gate")
    gate_row.refresh_from_db()
    assert gate_row.github_id == run["id"]
    assert [a.method for a in gate_row.writes.get().attempt_log.all()] == ["POST", "PATCH"]


def test_an_unchanged_check_run_is_not_written_again(relay, gate_row):
    relay.drain()
    gate_row.refresh_from_db()
    assert gate_check_run_refresh(gate_row.pr_number, HEAD) is None
    forced = writes.write_enqueue(UpstreamWrite.Kind.CHECK_RUN_UPDATE, f"check_run:{gate_row.pk}", check_run=gate_row)
    relay.drain()
    forced.refresh_from_db()
    assert (forced.state, forced.note, forced.attempt_log.get().outcome) == ("sent", "unchanged", "skipped")
    assert len(relay.writes_to("PATCH", rf"{GATE_PATH}/\d+")) == 0


def test_the_sweeper_picks_up_unkicked_retrying_and_abandoned_writes_only(gate_row, settings):
    settings.CRCR_SWEEP_GRACE_SECONDS = 20
    write = gate_row.writes.get()
    assert write.pk not in outbox.writes_due(10), "the kick has its fair chance first"
    UpstreamWrite.objects.filter(pk=write.pk).update(next_attempt_at=timezone.now() - timedelta(minutes=2))
    assert outbox.writes_due(10) == [write.pk]
    UpstreamWrite.objects.filter(pk=write.pk).update(
        state="sending", lease_expires_at=timezone.now() + timedelta(seconds=60)
    )
    assert outbox.writes_due(10) == []


def test_the_sweep_task_sends_what_is_due(gate_row, monkeypatch):
    from relay.checks import tasks

    sent = []
    monkeypatch.setattr(tasks.upstream_write_send, "apply_async", lambda args, **kw: sent.append(args))
    UpstreamWrite.objects.update(next_attempt_at=timezone.now() - timedelta(minutes=2))
    assert tasks.upstream_write_sweep() == 1
    assert sent == [[gate_row.writes.get().pk]]


def test_a_write_is_kicked_once_after_commit(db, django_capture_on_commit_callbacks, monkeypatch):
    from relay.checks import tasks

    kicks = []
    monkeypatch.setattr(tasks.upstream_write_send, "apply_async", lambda args, countdown=0.0: kicks.append(args))
    row = UpstreamCheckRun.objects.create(kind="gate", name="crcr/gate", head_sha=HEAD, pr_number=2)
    with django_capture_on_commit_callbacks(execute=True):
        write = writes.write_enqueue(UpstreamWrite.Kind.CHECK_RUN_CREATE, f"check_run:{row.pk}", check_run=row)
        assert kicks == [], "not before the row is committed"
    assert kicks == [[write.pk]]


def test_the_tasks_have_stable_names_and_the_beat_sweeps_every_minute():
    from crcr.celery import app
    from relay.checks import tasks

    assert (tasks.upstream_write_send.name, tasks.upstream_write_sweep.name) == (
        "relay.upstream_write_send",
        "relay.upstream_write_sweep",
    )
    entries = {e["task"]: e["schedule"] for e in app.conf.beat_schedule.values()}
    assert entries["relay.upstream_write_sweep"] == 60.0


def test_the_deliveries_page_lists_upstream_writes_with_their_attempts(relay, gate_row, admin_client):
    client = admin_client
    relay.gh.fail("POST", GATE_PATH, status=500)
    relay.drain()
    relay.make_due()
    relay.drain()
    page = client.get("/relay/deliveries?view=writes").content.decode()
    assert "Upstream writes" in page and "crcr/gate @ ec26c3e57c (PR #2)" in page
    assert "transient failure · POST" in page and "HTTP 500" in page and "HTTP 201" in page


def test_a_failing_receiver_does_not_fail_the_webhook(relay, monkeypatch, caplog):
    from relay.checks import reactions as receivers

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(receivers, "gate_check_run_refresh", broken)
    relay.pr("opened")
    assert "delivery_reacted failed" in caplog.text


def test_an_unexpected_error_is_retried_and_ends_visibly_instead_of_looping(relay, gate_row, monkeypatch, settings):
    settings.CRCR_UPSTREAM_WRITE_MAX_ATTEMPTS = 2
    monkeypatch.setattr(checkruns, "check_run_prepare", broken_handler)
    relay.drain()
    write = gate_row.writes.get()
    assert (write.state, write.last_error) == ("retrying", "LookupError: row vanished")
    relay.make_due()
    relay.drain()
    assert gate_row.writes.get().state == "failed"


def broken_handler(write):
    raise LookupError("row vanished")


@pytest.mark.parametrize("how", ["fails", "is deferred"])
def test_a_write_that_cannot_go_while_a_newer_one_waits_is_superseded_by_it(relay, gate_row, monkeypatch, how):
    """A change arrives while the write is being sent; that send fails (or GitHub's write budget
    defers it): the older one must not go back to waiting beside the newer (one unsent per target)."""
    from relay.outbox.engine import Deferred

    first = gate_row.writes.get()

    def newer_arrives(write):
        writes.write_enqueue(first.kind, first.target_key, check_run=gate_row)
        raise Deferred("write budget spent", 20) if how == "is deferred" else ConnectionError("reset by peer")

    monkeypatch.setattr(checkruns, "check_run_prepare", newer_arrives)
    assert outbox.write_send(first.pk) == "superseded"
    first.refresh_from_db()
    assert first.state == "superseded" and [w.state for w in unsent(gate_row)] == ["pending"]
