"""Sending dispatches through the real stand-in over HTTP: tokens, payloads, sorted failures."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from relay.callbacks.tokens import callback_token_read
from relay.dispatch import sending as dispatching
from relay.github.installations import installation_remember
from relay.models import Dispatch
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


def refresh(dispatch) -> Dispatch:
    dispatch.refresh_from_db()
    return dispatch


def make_due(dispatch):
    Dispatch.objects.filter(pk=dispatch.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))


def test_it_sends_a_signed_well_formed_dispatch(installed, dispatch):
    assert dispatching.dispatch_send(dispatch.pk) == "sent"
    sent = installed.dispatches[0]
    assert sent["repo"].lower() == REPO and sent["event_type"] == "pull_request"
    body = sent["client_payload"]
    assert set(body) == {"event_type", "delivery_id", "payload", "callback_token"}
    assert body["delivery_id"] == dispatch.delivery.guid
    assert body["payload"] == dispatch.delivery.payload, "sent verbatim when it fits"
    binding = callback_token_read(body["callback_token"])
    assert (binding.repo, binding.pr_number, binding.head_sha) == (REPO, 2, dispatch.head_sha)
    row = refresh(dispatch)
    assert row.state == "sent" and row.sent_at and row.attempts == 1
    assert list(row.attempt_log.values_list("outcome", "status_code")) == [("sent", 204)]


def test_it_reuses_the_installation_token_until_it_nears_expiry(installed, dispatch):
    other = DispatchFactory(delivery=dispatch.delivery, project=ProjectFactory(full_name="intel/other"))
    installed.add_repo("intel/other", repo_id=124, installation_id=11)
    dispatching.dispatch_send(dispatch.pk)
    dispatching.dispatch_send(other.pk)
    assert len(installed.requests("POST", r"/app/installations/11/access_tokens")) == 1


def test_it_retries_after_a_500_and_then_sends(installed, dispatch):
    installed.fail("POST", rf"/repos/{REPO}/dispatches", status=500, times=1)
    assert dispatching.dispatch_send(dispatch.pk) == "retrying"
    row = refresh(dispatch)
    assert row.next_attempt_at > timezone.now() and "500" in row.last_error
    assert dispatching.dispatch_send(dispatch.pk) is None, "not due yet: nothing to claim"
    make_due(dispatch)
    assert dispatching.dispatch_send(dispatch.pk) == "sent"
    assert list(refresh(dispatch).attempt_log.values_list("outcome", "status_code")) == [
        ("transient", 500),
        ("sent", 204),
    ]


def test_it_honours_retry_after_on_429(installed, dispatch):
    installed.fail("POST", rf"/repos/{REPO}/dispatches", status=429, retry_after=120)
    before = timezone.now()
    assert dispatching.dispatch_send(dispatch.pk) == "retrying"
    row = refresh(dispatch)
    assert row.next_attempt_at >= before + timedelta(seconds=119)
    assert row.attempt_log.get().retry_at == row.next_attempt_at


def test_it_waits_for_the_primary_rate_limit_reset(installed, dispatch):
    installed.fail("POST", rf"/repos/{REPO}/dispatches", status=403, retry_after=None)
    assert dispatching.dispatch_send(dispatch.pk) == "retrying"
    assert refresh(dispatch).next_attempt_at > timezone.now() + timedelta(seconds=1)


def test_it_marks_a_repo_without_the_app_not_installed_and_stops(standin, dispatch):
    standin.add_repo(REPO, repo_id=123, installation_id=None)
    assert dispatching.dispatch_send(dispatch.pk) == "not_installed"
    make_due(dispatch)
    assert dispatching.dispatch_send(dispatch.pk) is None
    assert refresh(dispatch).attempt_log.get().outcome == "not_installed"


def test_it_stops_on_a_422(installed, dispatch):
    installed.fail("POST", rf"/repos/{REPO}/dispatches", status=422, body={"message": "Invalid request."})
    assert dispatching.dispatch_send(dispatch.pk) == "failed"
    assert "422" in refresh(dispatch).last_error


def test_it_treats_a_timeout_as_transient(installed, dispatch, settings):
    from relay.github import client as github

    settings.GITHUB_HTTP_TIMEOUT = 0.3
    github.reset_http_client()
    installed.fail("POST", rf"/repos/{REPO}/dispatches", status=None, delay=1.0)
    assert dispatching.dispatch_send(dispatch.pk) == "retrying"
    assert "timed out" in refresh(dispatch).last_error


def test_it_gives_up_after_the_last_attempt(installed, dispatch, settings):
    settings.CRCR_DISPATCH_MAX_ATTEMPTS = 2
    installed.fail("POST", rf"/repos/{REPO}/dispatches", status=502, times=None)
    assert dispatching.dispatch_send(dispatch.pk) == "retrying"
    make_due(dispatch)
    assert dispatching.dispatch_send(dispatch.pk) == "failed"


def test_it_mints_a_new_token_once_when_github_says_the_cached_one_is_bad(installed, dispatch):
    installed.fail("POST", rf"/repos/{REPO}/dispatches", status=401, body={"message": "Bad credentials"})
    assert dispatching.dispatch_send(dispatch.pk) == "sent"
    assert len(installed.requests("POST", r"/app/installations/11/access_tokens")) == 2


def test_it_trims_an_oversized_payload_to_what_github_accepts(installed, dispatch):
    payload = dispatch.delivery.payload
    payload["pull_request"]["body"] = "x" * 200_000
    dispatch.delivery.save()
    assert dispatching.dispatch_send(dispatch.pk) == "sent"
    sent = installed.dispatches[0]["client_payload"]
    assert len(json.dumps(sent)) < 64 * 1024
    pr = sent["payload"]["pull_request"]
    assert pr["head"]["sha"] == dispatch.head_sha and pr["number"] == 2
    assert sent["payload"]["repository"]["full_name"] == "pytorch/pytorch" and sent["payload"]["crcr_trimmed"]


def test_exactly_one_of_two_concurrent_senders_claims_a_row(dispatch):
    claimed = [dispatching.dispatch_claim(dispatch.pk), dispatching.dispatch_claim(dispatch.pk)]
    assert sum(c is not None for c in claimed) == 1


def test_the_sweeper_picks_up_unkicked_and_abandoned_rows_only(dispatch, settings):
    settings.CRCR_SWEEP_GRACE_SECONDS = 20
    fresh = DispatchFactory()
    Dispatch.objects.filter(pk=dispatch.pk).update(next_attempt_at=timezone.now() - timedelta(minutes=2))
    abandoned = DispatchFactory(state="sending", lease_expires_at=timezone.now() - timedelta(seconds=1))
    DispatchFactory(state="sending", lease_expires_at=timezone.now() + timedelta(seconds=60))
    DispatchFactory(state="sent")
    assert sorted(dispatching.dispatches_due(100)) == sorted([dispatch.pk, abandoned.pk])
    assert fresh.pk not in dispatching.dispatches_due(100)


def test_a_worker_killed_mid_send_is_resent_after_its_lease(installed, dispatch):
    assert dispatching.dispatch_claim(dispatch.pk) is not None  # the worker dies holding it
    assert dispatching.dispatch_send(dispatch.pk) is None
    Dispatch.objects.filter(pk=dispatch.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert dispatching.dispatch_send(dispatch.pk) == "sent"


def test_retry_delays_grow_are_capped_and_jittered(settings):
    settings.CRCR_DISPATCH_BACKOFF_BASE_SECONDS = 5
    settings.CRCR_DISPATCH_BACKOFF_MAX_SECONDS = 60
    delays = [dispatching.DISPATCHES.retry_delay(n) for n in range(1, 10)]
    assert 2.5 <= delays[0] <= 5 and all(d <= 60 for d in delays) and delays[-1] >= 30
    assert len({round(dispatching.DISPATCHES.retry_delay(4), 6) for _ in range(20)}) > 1
    assert dispatching.DISPATCHES.retry_delay(1, retry_after=300) == 300


def test_a_dead_cache_only_costs_a_fresh_installation_token(installed, dispatch, monkeypatch):
    from django.core.cache import cache

    def down(*args, **kwargs):
        raise ConnectionError("redis is down")

    for name in ("get", "set", "delete"):
        monkeypatch.setattr(cache, name, down)
    assert dispatching.dispatch_send(dispatch.pk) == "sent"


@pytest.mark.parametrize("level, reacts", [("L4", True), ("L3", True), ("L2", False), ("L1", False)])
def test_only_a_backend_that_shows_on_the_pr_gets_a_reaction_once_sent(
    installed, dispatch, level, reacts, monkeypatch, django_capture_on_commit_callbacks
):
    reactions = []
    monkeypatch.setattr(dispatching.follow_up, "dispatch_sent", reactions.append)
    dispatch.project.level, dispatch.project.device = level, "xpu" if level == "L3" else ""
    dispatch.project.save()
    with django_capture_on_commit_callbacks(execute=True):
        assert dispatching.dispatch_send(dispatch.pk) == "sent"
    assert reactions == ([dispatch.pk] if reacts else [])


def test_a_repo_whose_installation_is_known_costs_one_read_and_no_installation_lookup(installed, dispatch):
    installation_remember(REPO, 11)
    with CaptureQueriesContext(connection) as queries:
        assert dispatching.dispatch_send(dispatch.pk) == "sent"
    assert len([q for q in queries if q["sql"].lstrip().upper().startswith("SELECT")]) == 1, "row, delivery, project"
    assert installed.requests("GET", rf"/repos/{REPO}/installation") == []


def test_a_repo_whose_installation_is_unknown_is_asked_of_github_once_and_remembered(installed, dispatch):
    later = DispatchFactory(delivery=DeliveryFactory(payload=dispatch.delivery.payload), project=dispatch.project)
    assert dispatching.dispatch_send(dispatch.pk) == "sent"
    assert dispatching.dispatch_send(later.pk) == "sent"
    assert len(installed.requests("GET", rf"/repos/{REPO}/installation")) == 1
    assert installed.dispatches[1]["client_payload"]["delivery_id"] == later.delivery.guid
