"""The relay's alerts on its own health: upstream's three dashboard rules over the health probe
(relay/health/probe.py), evaluated by beat every minute (`alerts_evaluate`, task relay.alerts_evaluate).

1. **Unexpected nightly probe outcomes** in the last CRCR_ALERT_NIGHTLY_HOURS (24) > 0.
2. **Probe pass rate** over the last CRCR_ALERT_PASS_RATE_PRS (20) relayed PRs
   < CRCR_ALERT_PASS_RATE_MIN (0.95).
3. **Hours since the last completed nightly probe** > CRCR_ALERT_SILENT_HOURS (30); no nightly
   probe ever completed fires too: silence is the worst case, not the best.

Each rule fires once per episode: the evaluation that first finds it firing opens an
`AlertEpisode` (at most one open per rule, by a unique constraint) and records a
`health_degraded` event; the one that finds it clear closes the episode with a conditional
UPDATE and records `health_recovered`. The events reach subscribers through relay.notify (webhooks,
Slack-compatible webhooks, email). The last evaluation is kept in RelayState for /crcr. The same
rules ship as Prometheus alerting rules over /metrics (deploy/prometheus/crcr-alerts.yml)."""

import logging
from dataclasses import asdict, dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from relay.models import AlertEpisode, NotificationEvent, Project, RelayState
from relay.notify.events import event_emit
from relay.policy.links import public_url

from . import probe as figures

logger = logging.getLogger(__name__)
Rule = AlertEpisode.Rule
STATE_KEY = "relay-alerts"


@dataclass(frozen=True)
class Reading:
    """One rule as one evaluation found it."""

    rule: str
    firing: bool
    value: float | None
    """None: no data."""
    summary: str
    threshold: str


def thresholds() -> dict:
    return {
        "nightly_hours": settings.CRCR_ALERT_NIGHTLY_HOURS,
        "unexpected_max": settings.CRCR_ALERT_UNEXPECTED_MAX,
        "pass_rate_prs": settings.CRCR_ALERT_PASS_RATE_PRS,
        "pass_rate_min": settings.CRCR_ALERT_PASS_RATE_MIN,
        "silent_hours": settings.CRCR_ALERT_SILENT_HOURS,
    }


# --- the rules ------------------------------------------------------------------------------------


def nightly_unexpected_reading(probe: Project | None, now: datetime) -> Reading:
    t = thresholds()
    threshold = f"> {t['unexpected_max']:g} in {t['nightly_hours']:g} h"
    if probe is None:
        return Reading(Rule.PROBE_NIGHTLY_UNEXPECTED, False, None, "no health probe registered", threshold)
    jobs = figures.nightly_unexpected(probe, now, t["nightly_hours"])
    names = ", ".join(f"{j.job_name or j.workflow_name}: {j.conclusion}" for j in jobs[:5])
    summary = f"{len(jobs)} unexpected nightly probe outcome{'s' if len(jobs) != 1 else ''} in {t['nightly_hours']:g} h"
    return Reading(
        Rule.PROBE_NIGHTLY_UNEXPECTED,
        len(jobs) > t["unexpected_max"],
        float(len(jobs)),
        f"{summary} ({names})" if names else summary,
        threshold,
    )


def pr_pass_rate_reading(probe: Project | None, now: datetime) -> Reading:
    t = thresholds()
    threshold = f"< {t['pass_rate_min']:.0%} over the last {t['pass_rate_prs']} PRs"
    if probe is None:
        return Reading(Rule.PROBE_PR_PASS_RATE, False, None, "no health probe registered", threshold)
    window = figures.pr_pass_rate(probe, t["pass_rate_prs"])
    if window.rate is None:
        return Reading(Rule.PROBE_PR_PASS_RATE, False, None, "no relayed PR decided by the probe yet", threshold)
    failing = ", ".join(f"#{pr.number}" for pr in window.prs if not pr.passed)
    summary = f"probe passed {window.passed} of the last {len(window.prs)} relayed PRs ({window.rate:.0%})"
    return Reading(
        Rule.PROBE_PR_PASS_RATE,
        window.rate < t["pass_rate_min"],
        window.rate,
        f"{summary}; failed: {failing}" if failing else summary,
        threshold,
    )


def nightly_silent_reading(probe: Project | None, now: datetime) -> Reading:
    t = thresholds()
    threshold = f"> {t['silent_hours']:g} h since the last completed nightly probe, or none"
    last = figures.last_nightly_completed_at(probe) if probe is not None else None
    if last is None:
        return Reading(Rule.PROBE_NIGHTLY_SILENT, True, None, "no nightly probe has ever completed", threshold)
    hours = (now - last).total_seconds() / 3600
    return Reading(
        Rule.PROBE_NIGHTLY_SILENT,
        hours > t["silent_hours"],
        hours,
        f"last nightly probe completed {hours:.1f} h ago ({last:%Y-%m-%d %H:%M} UTC)",
        threshold,
    )


RULES = (nightly_unexpected_reading, pr_pass_rate_reading, nightly_silent_reading)


def readings(now: datetime) -> list[Reading]:
    probe = figures.probe_project()
    return [rule(probe, now) for rule in RULES]


# --- episodes -------------------------------------------------------------------------------------


def alerts_evaluate(now: datetime | None = None) -> list[Reading]:
    """Evaluate every rule: open an episode (and tell subscribers) for a rule that started
    firing, close one (and tell them) for a rule that cleared; keep the readings for /crcr."""
    now = now or timezone.now()
    found = readings(now)
    for reading in found:
        (episode_fire if reading.firing else episode_resolve)(reading, now)
    RelayState.objects.update_or_create(
        key=STATE_KEY, defaults={"value": {"at": now.isoformat(), "readings": [asdict(r) for r in found]}}
    )
    return found


def episode_fire(reading: Reading, now: datetime) -> AlertEpisode | None:
    """The open episode of the rule, kept up to date; opened (once) if there is none."""
    seen = {"last_value": reading.value, "last_summary": reading.summary[:300], "last_seen_at": now}
    if AlertEpisode.objects.filter(rule=reading.rule, resolved_at__isnull=True).update(**seen):
        return None
    try:
        with transaction.atomic():
            episode = AlertEpisode.objects.create(
                rule=reading.rule, started_at=now, value=reading.value, summary=reading.summary[:300], **seen
            )
            _announce(NotificationEvent.Kind.HEALTH_DEGRADED, episode, reading, "fired")
    except IntegrityError:
        return None  # another evaluation opened it a moment ago
    logger.warning("relay alert %s fired: %s", reading.rule, reading.summary)
    return episode


def episode_resolve(reading: Reading, now: datetime) -> AlertEpisode | None:
    episode = AlertEpisode.objects.filter(rule=reading.rule, resolved_at__isnull=True).first()
    if episode is None:
        return None
    with transaction.atomic():
        if not AlertEpisode.objects.filter(pk=episode.pk, resolved_at__isnull=True).update(resolved_at=now):
            return None  # closed by another evaluation
        episode.resolved_at = now
        _announce(NotificationEvent.Kind.HEALTH_RECOVERED, episode, reading, "resolved")
    logger.info("relay alert %s resolved: %s", reading.rule, reading.summary)
    return episode


def _announce(kind: str, episode: AlertEpisode, reading: Reading, what: str) -> None:
    label = Rule(episode.rule).label
    title = f"Relay health alert {what}: {label}" + (
        f" ({reading.summary})" if what == "fired" else f" after {_since(episode)}"
    )
    event_emit(
        kind,
        f"alert:{episode.rule}:{episode.pk}:{what}",
        title,
        details={
            "url": public_url("/crcr#alerts"),
            "lines": [
                reading.summary,
                f"alerts when {reading.threshold}",
                f"since {episode.started_at:%Y-%m-%d %H:%M} UTC",
            ],
            "rule": episode.rule,
            "episode": episode.pk,
            "value": reading.value,
            "started_at": episode.started_at.isoformat(),
            "resolved_at": episode.resolved_at.isoformat() if episode.resolved_at else None,
        },
    )


def _since(episode: AlertEpisode) -> str:
    minutes = int(((episode.resolved_at or timezone.now()) - episode.started_at).total_seconds() // 60)
    return f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"


# --- what /crcr shows -----------------------------------------------------------------------------


@dataclass(frozen=True)
class AlertStatus:
    rule: str
    label: str
    state: str
    """firing | ok | no_data | not_evaluated."""
    summary: str
    threshold: str
    since: datetime | None
    """When the open episode started (firing), or when the last one ended (ok)."""
    checked_at: datetime | None


def alert_statuses() -> list[AlertStatus]:
    """Each rule as the last evaluation left it, with since when it fires."""
    stored = RelayState.objects.filter(key=STATE_KEY).values_list("value", flat=True).first() or {}
    checked = parse_datetime(stored["at"]) if stored.get("at") else None
    found = {r["rule"]: r for r in stored.get("readings", [])}
    open_ = {e.rule: e for e in AlertEpisode.objects.filter(resolved_at__isnull=True)}
    return [_status(rule, found.get(rule.value), open_.get(rule.value), checked) for rule in Rule]


def _status(rule, reading: dict | None, episode: AlertEpisode | None, checked) -> AlertStatus:
    if reading is None:
        return AlertStatus(rule.value, rule.label, "not_evaluated", "not evaluated yet", "", None, checked)
    if episode is not None:
        state, since = "firing", episode.started_at
    else:
        state = "ok" if reading["value"] is not None else "no_data"
        last = AlertEpisode.objects.filter(rule=rule.value).values_list("resolved_at", flat=True).first()
        since = last
    return AlertStatus(rule.value, rule.label, state, reading["summary"], reading["threshold"], since, checked)
