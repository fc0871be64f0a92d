"""The done-when of issue 46 in the sandbox: stopping the simulated probe's nightly reporter
raises the 30-hour alert once the test's clock has moved past 30 hours, its notification reaches
the sandbox's webhook sink, and the next nightly clears it with a second notification."""

import json
import time
from datetime import timedelta
from unittest import mock

import pytest
from django.utils import timezone

from devtools.sandbox_registry import seed_sandbox_registry
from devtools.standin.sandbox import Nightlies, NotificationSink, Runners
from relay.health.alerts import alert_statuses, alerts_evaluate
from relay.models import AlertEpisode, JobRun, Notification, Project, Subscription
from relay.notify.delivery import NOTIFICATIONS
from tests.conftest import UPSTREAM, UPSTREAM_ID

pytestmark = pytest.mark.django_db(transaction=True)
PROBE = "pytorch/crcr-test"
Rule = AlertEpisode.Rule


class Clock:
    """The relay's clock (django.utils.timezone.now) running on from a moved start: real seconds
    still pass, so the outbox's backoff comes due as it would."""

    def __init__(self):
        self.offset = timedelta()
        self.real_now = timezone.now
        self.patch = mock.patch("django.utils.timezone.now", self.now)

    def now(self):
        return self.real_now() + self.offset

    def move(self, **delta):
        self.offset += timedelta(**delta)


@pytest.fixture
def clock():
    moved = Clock()
    with moved.patch:
        yield moved


def sandbox_projects() -> list[dict]:
    fields = ("full_name", "github_repo_id", "level", "ci_provider", "is_reference", "is_health_probe", "events")
    return json.loads(json.dumps(list(Project.objects.values(*fields))))


def deliver_all(timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while Notification.objects.filter(state__in=["pending", "retrying"]).exists():
        assert time.monotonic() < deadline, "notifications still waiting"
        for pk in Notification.objects.filter(state__in=["pending", "retrying"]).values_list("pk", flat=True):
            NOTIFICATIONS.send(pk)
        time.sleep(0.05)


def sink_titles(sink: NotificationSink) -> list[str]:
    lines = sink.log_path.read_text().splitlines() if sink.log_path.exists() else []
    return [json.loads(line)["title"] for line in lines]


def test_a_stopped_probe_nightly_raises_the_30_hour_alert_notifies_and_clears(
    live_server, standin, oidc, settings, tmp_path, clock
):
    settings.CRCR_NOTIFY_ALLOW_PRIVATE = True
    settings.CRCR_NOTIFY_BACKOFF_BASE_SECONDS = 0.05
    settings.CRCR_NOTIFY_BACKOFF_MAX_SECONDS = 0.1
    standin.add_installation(installation_id=1, account="pytorch")
    standin.add_repo(UPSTREAM, repo_id=UPSTREAM_ID, installation_id=1)
    nights = ["6a" * 20, "6b" * 20]
    for sha in nights:
        standin.add_commit(UPSTREAM, sha, message="nightly head")
    seed_sandbox_registry()
    sink = NotificationSink(tmp_path).start()
    Subscription.objects.create(
        name="relay health", channel="webhook", target=f"{sink.url}/ops", events=["health_degraded", "health_recovered"]
    )
    projects = [p for p in sandbox_projects() if p["full_name"] == PROBE]
    nightlies = Nightlies(Runners(standin, live_server.url, projects), projects, tmp_path)
    try:
        nightlies.run(nights[0])
        assert JobRun.objects.filter(project__full_name=PROBE, event_type="nightly", status="completed").count() == 4
        clock.move(hours=29)
        alerts_evaluate()
        assert not AlertEpisode.objects.filter(rule=Rule.PROBE_NIGHTLY_SILENT).exists()

        (tmp_path / "nightly-stopped.txt").write_text(f"{PROBE}\n")  # the operator stops the probe's nightly
        nightlies.run(nights[1])
        clock.move(hours=2)  # 31 h since the last completed nightly probe
        alerts_evaluate()
        [episode] = AlertEpisode.objects.filter(rule=Rule.PROBE_NIGHTLY_SILENT, resolved_at__isnull=True)
        silent = next(s for s in alert_statuses() if s.rule == Rule.PROBE_NIGHTLY_SILENT)
        assert silent.state == "firing" and silent.since == episode.started_at
        deliver_all()
        [fired] = sink_titles(sink)
        assert fired.startswith(
            "Relay health alert fired: no completed nightly probe (last nightly probe completed 31.0 h ago"
        )

        clock.move(hours=1)
        alerts_evaluate()  # still silent: the same episode, no second notification
        deliver_all()
        assert len(sink_titles(sink)) == 1

        (tmp_path / "nightly-stopped.txt").write_text("")
        nightlies.run(nights[1])
        alerts_evaluate()
        episode.refresh_from_db()
        assert episode.resolved_at is not None
        deliver_all()
        assert sink_titles(sink)[1] == "Relay health alert resolved: no completed nightly probe after 1 h 0 min"
    finally:
        sink.stop()
