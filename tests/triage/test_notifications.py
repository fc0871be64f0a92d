"""Subscriptions: a new backend-specific failure on trunk makes exactly one notification per
subscription, delivered through the outbox to a real local HTTP sink that fails twice first;
digests collect a day's events; oncalls are subscribed by default; recovery, upstream breaking
the reference and a resolved issue seen again are events too."""

import json
import threading
import time
from datetime import UTC, date, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail

from relay.models import KnownIssue, Notification, NotificationEvent, Subscription
from relay.notify.delivery import NOTIFICATIONS
from relay.notify.digest import digests_build
from relay.notify.events import event_emit

from .conftest import ROCM_ADDMM, XPU_ADDMM, result

pytestmark = pytest.mark.django_db


class Sink:
    """A webhook receiver on loopback that answers 500 to the first `failures` requests on each path."""

    def __init__(self, failures: int = 2):
        self.received: dict[str, list] = {}
        self.answered: dict[str, list[int]] = {}
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                tries = sink.answered.setdefault(self.path, [])
                status = 500 if len(tries) < failures else 200
                tries.append(status)
                if status == 200:
                    sink.received.setdefault(self.path, []).append(body)
                self.send_response(status)
                self.end_headers()
                self.wfile.write(b"ok" if status == 200 else b"try again")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def sink(settings):
    settings.CRCR_NOTIFY_ALLOW_PRIVATE = True
    settings.CRCR_NOTIFY_BACKOFF_BASE_SECONDS = 0.05
    settings.CRCR_NOTIFY_BACKOFF_MAX_SECONDS = 0.1
    sink = Sink()
    yield sink
    sink.close()


def deliver_all(timeout: float = 10.0) -> None:
    """Send what is due until nothing waits (the retries' backoff is a few tens of ms here)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = Notification.objects.filter(state__in=["pending", "retrying"])
        if not waiting.exists():
            return
        for pk in waiting.values_list("pk", flat=True):
            NOTIFICATIONS.send(pk)
        time.sleep(0.05)
    raise AssertionError("notifications still waiting after the timeout")


def story_new_failure(backends, trunk):
    """Intel XPU starts failing test_addmm on its own at trunk[3]; the reference passes."""
    for i, commit in enumerate(trunk[:4]):
        result(backends["ref"], commit.sha)
        result(backends["xpu"], commit.sha, [XPU_ADDMM] if i == 3 else [])
        result(backends["rocm"], commit.sha)


def subscribe(name, channel="webhook", target="", **fields):
    return Subscription.objects.create(name=name, channel=channel, target=target, **fields)


def test_a_new_backend_specific_trunk_failure_notifies_each_subscription_once_through_a_sink_that_fails_twice(
    backends, trunk, sink
):
    from relay.levels.events import events_detect

    generic = subscribe(
        "xpu json", target=f"{sink.url}/generic", project=backends["xpu"], events=["new_failure", "recovery"]
    )
    slack = subscribe("L4 slack", channel="slack", target=f"{sink.url}/slack", level="L4", events=["new_failure"])
    subscribe("rocm only", target=f"{sink.url}/rocm", project=backends["rocm"], events=["new_failure"])
    story_new_failure(backends, trunk)
    events_detect()
    events_detect()  # a second run, as the beat does every minute: nothing new
    [event] = NotificationEvent.objects.filter(kind="new_failure")
    assert event.project == backends["xpu"] and event.test_ids == ["test_ops.TestCommon.test_addmm_float32"]
    assert sorted(Notification.objects.values_list("subscription__name", flat=True)) == ["L4 slack", "xpu json"]
    deliver_all()
    assert sink.answered == {"/generic": [500, 500, 200], "/slack": [500, 500, 200]}
    for subscription in (generic, slack):
        [notification] = subscription.notifications.all()
        assert notification.state == "sent" and [a.outcome for a in notification.attempt_log.all()] == [
            "transient",
            "transient",
            "sent",
        ]
    [body] = sink.received["/generic"]
    assert body["kind"] == "new_failure" and body["event"]["backend"] == "intel/torch-xpu-ops"
    [culprit] = body["event"]["details"]["culprit_ranges"]
    assert culprit["first_failing"] == trunk[3].sha and culprit["last_passing"] == trunk[2].sha and culprit["exact"]
    [slack_body] = sink.received["/slack"]
    assert "new backend-specific failure" in slack_body["text"] and slack_body["blocks"][0]["text"]["type"] == "mrkdwn"


def test_a_sink_that_keeps_refusing_fails_the_notification_visibly(backends, settings):
    settings.CRCR_NOTIFY_ALLOW_PRIVATE = True
    subscribe("refused", target="http://127.0.0.1:9/closed-port")
    settings.CRCR_NOTIFY_MAX_ATTEMPTS = 2
    settings.CRCR_NOTIFY_BACKOFF_BASE_SECONDS = 0.01
    event_emit("recovery", "recovery:test", "Intel XPU passes again", project=backends["xpu"])
    deliver_all()
    notification = Notification.objects.get()
    assert notification.state == "failed" and notification.attempts == 2 and "ConnectError" in notification.last_error


def test_private_addresses_are_refused_unless_allowed(backends, settings):
    settings.CRCR_NOTIFY_ALLOW_PRIVATE = False
    subscribe("ssrf", target="http://127.0.0.1:8000/admin/")
    event_emit("recovery", "recovery:test", "Intel XPU passes again", project=backends["xpu"])
    deliver_all()
    notification = Notification.objects.get()
    assert notification.state == "failed" and "private or loopback" in notification.last_error


def test_a_digest_collects_a_days_events_into_one_message(backends, sink):
    subscribe("daily", target=f"{sink.url}/digest", project=backends["xpu"], digest=True)
    day = date(2026, 11, 30)
    for hour, key in ((9, "a"), (15, "b")):
        event_emit(
            "new_failure",
            f"new_failure:{key}",
            f"Intel XPU failure {key}",
            project=backends["xpu"],
            occurred_at=datetime(2026, 11, 30, hour, tzinfo=UTC),
        )
    assert set(Notification.objects.values_list("state", flat=True)) == {"held"}
    [digest_pk] = digests_build(day)
    assert digests_build(day) == []
    deliver_all()
    [body] = sink.received["/digest"]
    assert body["kind"] == "digest" and [e["title"] for e in body["events"]] == [
        "Intel XPU failure a",
        "Intel XPU failure b",
    ]
    assert Notification.objects.get(pk=digest_pk).state == "sent"
    assert set(Notification.objects.exclude(pk=digest_pk).values_list("state", flat=True)) == {"digested"}


def test_a_backends_oncalls_get_email_by_default(backends, settings, django_user_model):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    backends["xpu"].oncalls = ["xpu-oncall"]
    backends["xpu"].save()
    django_user_model.objects.create_user("XPU-oncall", "oncall@intel.example", "x" * 20)
    event_emit("new_failure", "new_failure:x", "Intel XPU: 1 new backend-specific failure", project=backends["xpu"])
    subscription = Subscription.objects.get(origin="oncall")
    assert subscription.channel == "email" and subscription.target == "oncall@intel.example"
    deliver_all()
    assert [m.subject for m in mail.outbox] == ["[CRCR HUD] Intel XPU: 1 new backend-specific failure"]
    subscription.active = False
    subscription.save()
    event_emit("new_failure", "new_failure:y", "again", project=backends["xpu"])
    assert Subscription.objects.filter(origin="oncall").count() == 1 and Notification.objects.count() == 1


def test_oncalls_stored_as_a_comma_separated_string_are_subscribed_by_handle(backends, django_user_model):
    backends["xpu"].oncalls = "@xpu-oncall, intel-ci"
    backends["xpu"].save()
    django_user_model.objects.create_user("intel-ci", "ci@intel.example", "x" * 20)
    django_user_model.objects.create_user("x", "x@intel.example", "x" * 20)  # a character of the string
    event_emit("new_failure", "new_failure:x", "Intel XPU: 1 new backend-specific failure", project=backends["xpu"])
    assert list(Subscription.objects.filter(origin="oncall").values_list("target", flat=True)) == ["ci@intel.example"]


def test_recovery_and_upstream_breaking_the_reference_are_events(backends, trunk):
    from relay.levels.events import events_detect

    for i, commit in enumerate(trunk[:4]):
        result(backends["ref"], commit.sha, [ROCM_ADDMM] if i == 2 else [])
        result(backends["xpu"], commit.sha, [XPU_ADDMM] if i == 1 else [])
    events_detect()
    kinds = dict(NotificationEvent.objects.values_list("key", "kind"))
    assert kinds[f"recovery:{backends['xpu'].pk}:{trunk[2].sha}"] == "recovery"
    assert kinds[f"upstream_broken:{trunk[2].sha}"] == "upstream_broken"


def test_the_reference_failing_on_a_known_issue_sends_no_upstream_broken_event(backends, trunk):
    from relay.levels.events import events_detect
    from relay.triage import issues

    issues.known_issue_create({"title": "addmm broken", "kind": "upstream", "test_patterns": ["*test_addmm*"]}, by="a")
    for i, commit in enumerate(trunk[:4]):
        result(backends["ref"], commit.sha, [ROCM_ADDMM] if i == 2 else [])
    events_detect()
    assert not NotificationEvent.objects.filter(kind="upstream_broken").exists()


def test_a_resolved_known_issue_seen_again_is_an_event_once(backends, trunk):
    from relay.notify.tasks import issue_occurrences_record
    from relay.triage import issues

    issue = issues.known_issue_create({"title": "addmm OOM", "test_patterns": ["TestCommon.test_addmm*"]}, by="alice")
    issues.known_issue_update(issue, {"state": KnownIssue.State.RESOLVED})
    subscribe("issue watch", target="https://example.org/hook", issue=issue)
    issue_occurrences_record(result(backends["xpu"], trunk[0].sha, [XPU_ADDMM]).pk)
    issue_occurrences_record(result(backends["rocm"], trunk[1].sha, [ROCM_ADDMM]).pk)
    [event] = NotificationEvent.objects.filter(kind="issue_seen_again")
    assert event.issue == issue and Notification.objects.filter(event=event).count() == 1


def test_readiness_turning_to_at_risk_is_an_event_once_and_no_data_alone_is_not(backends, trunk):
    from relay.levels.events import events_detect

    story_new_failure(backends, trunk)  # Intel XPU passes 3 of 4 jobs: under the 90 % pass rate
    events_detect()
    events_detect()
    assert list(NotificationEvent.objects.filter(kind="at_risk").values_list("project__full_name", flat=True)) == [
        "intel/torch-xpu-ops"
    ]


def test_a_relay_health_alert_firing_is_one_event_and_staying_on_is_not(backends, settings):
    """The relay's health alerts (relay/health/alerts.py) reach subscribers of health_degraded once per
    episode; their clearing is health_recovered."""
    from datetime import timedelta

    from django.utils import timezone

    from relay.health.alerts import alerts_evaluate
    from relay.models import JobRun, Project

    probe = Project.objects.create(
        full_name="pytorch/crcr-test", level="L2", is_health_probe=True, hardware_kind="probe"
    )
    subscribe("health", target="https://example.org/hook", events=["health_degraded", "health_recovered"])
    now = timezone.now()

    def nightly(at, conclusion="success"):
        JobRun.objects.create(
            project=probe,
            delivery_key="a" * 40,
            event_type="nightly",
            run_id=str(at.timestamp()),
            workflow_name="nightly",
            job_name="smoke",
            status="completed",
            conclusion=conclusion,
            head_sha="a" * 40,
            created_at=at,
            completed_at=at,
        )

    nightly(now)
    alerts_evaluate(now)
    assert not NotificationEvent.objects.filter(kind__startswith="health").exists()
    nightly(now + timedelta(minutes=1), "failure")
    alerts_evaluate(now + timedelta(minutes=2))
    alerts_evaluate(now + timedelta(minutes=3))
    [event] = NotificationEvent.objects.filter(kind="health_degraded")
    assert Notification.objects.filter(event=event).count() == 1
    assert "unexpected nightly probe outcomes" in event.title


def test_a_recovery_is_news_only_after_a_failure_was_announced(backends, trunk):
    """ROCm fails test_addmm on trunk[1] together with the reference (upstream's doing, not
    announced as ROCm's), then passes: no recovery to announce."""
    from relay.levels.events import events_detect

    ref_addmm = {
        "classname": "test_ops.TestCommonPRIVATEUSE1",
        "name": "test_addmm_privateuse1_float32",
        "file": "test_ops.py",
    }
    for i, commit in enumerate(trunk[:3]):
        result(backends["ref"], commit.sha, [ref_addmm] if i == 1 else [])
        result(backends["rocm"], commit.sha, [ROCM_ADDMM] if i == 1 else [])
    events_detect()
    assert NotificationEvent.objects.filter(kind="upstream_broken").count() == 1
    assert not NotificationEvent.objects.filter(project=backends["rocm"], kind__in=["new_failure", "recovery"]).exists()


def test_a_flaky_test_s_failure_is_never_announced_as_a_new_regression(backends, trunk):
    """Intel XPU's test_addmm passed on retry at trunk[1] (the test store holds it flaky): its
    failure at trunk[3] is a flake, not a new backend-specific failure."""
    from relay.levels.events import events_detect
    from relay.models import JobRun
    from relay.teststore.store import store_sweep

    for i, commit in enumerate(trunk[:3]):
        result(backends["ref"], commit.sha)
        result(backends["xpu"], commit.sha, [XPU_ADDMM] if i == 1 else [])
    retry = JobRun.objects.get(project=backends["xpu"], head_sha=trunk[1].sha)
    JobRun.objects.create(**{**_fields(retry), "run_attempt": 2, "conclusion": "success", "tests_failed": None})
    store_sweep()
    result(backends["ref"], trunk[3].sha)
    result(backends["xpu"], trunk[3].sha, [XPU_ADDMM])
    events_detect()
    assert not NotificationEvent.objects.filter(project=backends["xpu"], kind="new_failure").exists()


def _fields(job) -> dict:
    keep = ("project", "delivery_key", "event_type", "run_id", "workflow_name", "job_name", "status", "head_sha")
    return {name: getattr(job, name) for name in keep} | {"tests_total": job.tests_total}
