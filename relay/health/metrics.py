"""What the relay tells Prometheus (served at /metrics by relay/health/exposition.py, which adds the level
criteria). Everything the relay stores is read from the database at scrape time, so every
gunicorn and Celery process agrees and the hot paths pay nothing; what it does not store, the
answer each callback got, is one prometheus_client counter bumped by the callback view, which
in multiprocess mode (PROMETHEUS_MULTIPROC_DIR, set by crcr/gunicorn_conf.py) adds up across
processes (docs/admins.md, "Alerts and metrics")."""

import os
from datetime import datetime

from django.conf import settings
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client import Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from relay.health.healthz import HEARTBEAT_KEY
from relay.models import AlertEpisode, Delivery, Dispatch, JobRun, Notification, RelayState, UpstreamWrite

from . import probe as figures

CALLBACK_ANSWERS = Counter(
    "crcr_callback_answers",
    "Callbacks answered, by answer: the step recorded (in_progress, completed, duplicate, ignored) or why refused",
    ["answer"],
    registry=None,
)
REFUSALS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "timeout",
    409: "conflict",
    413: "too_large",
    429: "rate_limited",
    503: "unavailable",
}
ACCEPTED = ("in_progress", "completed", "duplicate", "ignored")
_children: dict[str, object] = {}


def callback_answered(status: int, recorded: str = "") -> None:
    """One callback's answer counted: a dictionary lookup and an increment (no I/O)."""
    answer = (recorded if recorded in ACCEPTED else "accepted") if status < 400 else REFUSALS.get(status, "other")
    child = _children.get(answer)
    if child is None:
        child = _children[answer] = CALLBACK_ANSWERS.labels(answer)
    child.inc()


def multiprocess() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


OUTBOXES = (("dispatch", Dispatch), ("upstream_write", UpstreamWrite), ("notification", Notification))
OPEN = ("pending", "sending", "retrying")


class RelayCollector:
    """The relay's figures, read when Prometheus scrapes (prometheus_client custom collector)."""

    def collect(self):
        now = timezone.now()
        yield from delivery_figures()
        yield from dispatches()
        yield from outboxes(now)
        yield from workers(now)
        yield from probe_figures(now)
        yield from alerts()


def _seconds(moment: datetime | None) -> float | None:
    return moment.timestamp() if moment else None


def delivery_figures():
    family = CounterMetricFamily("crcr_webhook_deliveries", "Webhook deliveries stored, by outcome", labels=["outcome"])
    counts = dict(Delivery.objects.order_by().values_list("outcome").annotate(n=Count("id")))
    for outcome in Delivery.Outcome.values:
        family.add_metric([outcome], counts.get(outcome, 0))
    yield family


def dispatches():
    family = GaugeMetricFamily(
        "crcr_dispatches", "Repository dispatches, by the state each is in now", labels=["state"]
    )
    counts = dict(Dispatch.objects.order_by().values_list("state").annotate(n=Count("id")))
    for state in Dispatch.State.values:
        family.add_metric([state], counts.get(state, 0))
    yield family


def outboxes(now: datetime):
    depth = GaugeMetricFamily(
        "crcr_outbox_depth", "Outbox rows not sent yet (pending, sending, retrying)", labels=["kind"]
    )
    age = GaugeMetricFamily(
        "crcr_outbox_oldest_age_seconds", "Age of the oldest outbox row not sent yet (0: none waits)", labels=["kind"]
    )
    for kind, model in OUTBOXES:
        waiting = model.objects.filter(state__in=OPEN).aggregate(n=Count("id"), oldest=Min("created_at"))
        depth.add_metric([kind], waiting["n"])
        age.add_metric([kind], max(0.0, (now - waiting["oldest"]).total_seconds()) if waiting["oldest"] else 0.0)
    yield depth
    yield age


def workers(now: datetime):
    beat = RelayState.objects.filter(key=HEARTBEAT_KEY).values_list("updated_at", flat=True).first()
    if beat is not None:
        yield GaugeMetricFamily(
            "crcr_worker_heartbeat_age_seconds",
            "Seconds since a Celery worker last recorded its heartbeat (absent: never)",
            value=max(0.0, (now - beat).total_seconds()),
        )
    cutoff = now - figures.stuck_after()
    running = JobRun.objects.filter(status=JobRun.Status.IN_PROGRESS)
    stuck = running.filter(in_progress_at__lt=cutoff).aggregate(n=Count("id"), oldest=Min("in_progress_at"))
    yield GaugeMetricFamily(
        "crcr_sweeper_stuck_jobs",
        "Jobs in progress past the timeout and grace the sweeper ends them by",
        value=stuck["n"],
    )
    lag = (cutoff - stuck["oldest"]).total_seconds() if stuck["oldest"] else 0.0
    yield GaugeMetricFamily(
        "crcr_sweeper_lag_seconds",
        "How far behind the results sweeper is: the oldest stuck job's time past its sweep (0: none)",
        value=max(0.0, lag),
    )
    yield GaugeMetricFamily(
        "crcr_jobs_in_progress", "Jobs reported in progress and not completed", value=running.count()
    )


def probe_figures(now: datetime):
    """The three alert rules' figures (relay/health/probe.py); a figure without data is absent, so a
    rule on it sees no data (the Prometheus rules treat an absent last-nightly as firing)."""
    probe = figures.probe_project()
    if probe is None:
        return
    hours = settings.CRCR_ALERT_NIGHTLY_HOURS
    yield GaugeMetricFamily(
        "crcr_probe_nightly_unexpected_jobs",
        f"Nightly probe jobs in the last {hours:g} h that did not end as built (latest attempt per run and job)",
        value=len(figures.nightly_unexpected(probe, now, hours)),
    )
    window = figures.pr_pass_rate(probe, settings.CRCR_ALERT_PASS_RATE_PRS)
    yield GaugeMetricFamily(
        "crcr_probe_prs_counted",
        "Relayed PRs in the probe's pass-rate window (at most the window)",
        value=len(window.prs),
    )
    if window.rate is not None:
        yield GaugeMetricFamily(
            "crcr_probe_pr_pass_rate",
            f"Share of the last {settings.CRCR_ALERT_PASS_RATE_PRS} relayed PRs the probe passed",
            value=window.rate,
        )
    last = figures.last_nightly_completed_at(probe)
    if last is not None:
        yield GaugeMetricFamily(
            "crcr_probe_nightly_last_completed_timestamp_seconds",
            "When a nightly probe job last completed by callback (Unix time)",
            value=last.timestamp(),
        )


def alerts():
    family = GaugeMetricFamily(
        "crcr_alert_firing",
        "The relay's own evaluation of each alert rule (relay/health/alerts.py): 1 firing",
        labels=["rule"],
    )
    open_rules = set(AlertEpisode.objects.filter(resolved_at__isnull=True).values_list("rule", flat=True))
    for rule in AlertEpisode.Rule.values:
        family.add_metric([rule], 1.0 if rule in open_rules else 0.0)
    yield family
