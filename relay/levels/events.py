"""The level loop's events, detected every minute by its beat task (relay.level_events_detect):
those that need what only the level loop computes (readiness). The events about results on trunk
are relay.notify.trunk's (beat task relay.trunk_events_detect); `events_detect` runs both, for
an earlier release's one beat entry. The relay's health alerts are relay/health/alerts.py's (beat
task relay.alerts_evaluate). Each is recorded once (by key) through
relay.notify.events.event_emit, which owes each matching subscription one notification.

* **at_risk** (backend, day): readiness turned to "at risk of demotion" because a criterion
  failed over the last 7 days (not merely for lack of data)."""

from datetime import timedelta

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from relay.models import Level, NotificationEvent, Project, RelayState
from relay.notify.events import event_emit
from relay.notify.trunk import trunk_events_detect
from relay.policy.links import backend_path, public_url

Kind = NotificationEvent.Kind
OUTLOOK_KEY = "notify-readiness-outlooks"
READINESS_EVERY = timedelta(minutes=10)


def events_detect(now=None) -> list[NotificationEvent]:
    now = now or timezone.now()
    return trunk_events_detect(now) + readiness_events(now)


# --- readiness ---------------------------------------------------------------------------------


def readiness_events(now) -> list[NotificationEvent]:
    """Each L3/L4 backend whose readiness turned to "at risk of demotion" (every 10 minutes)."""
    state, _ = RelayState.objects.get_or_create(key=OUTLOOK_KEY, defaults={"value": {}})
    checked = state.value.get("_checked_at")
    if checked and now - parse_datetime(checked) < READINESS_EVERY:
        return []
    from relay.levels.readiness import backend_readiness
    from relay.tallies.buckets import TalliesPending

    outlooks, events = dict(state.value), []
    for project in Project.objects.filter(active=True, is_health_probe=False, level__in=[Level.L3, Level.L4]):
        try:
            readiness = backend_readiness(project, now)
        except TalliesPending:
            return []  # the tallies are still being computed: ask next time
        at_risk = readiness.change == "demote"  # relay.levels.criteria.level_change, as the page and the API
        if at_risk and outlooks.get(str(project.id)) != "at_risk":
            events.append(
                event_emit(
                    Kind.AT_RISK,
                    f"at_risk:{project.id}:{now.date()}",
                    f"{project.label}: {readiness.headline}",
                    project=project,
                    details={
                        "url": public_url(backend_path(project.full_name)),
                        "lines": [readiness.headline],
                    },
                )
            )
        outlooks[str(project.id)] = "at_risk" if at_risk else readiness.outlook
    outlooks["_checked_at"] = now.isoformat()
    RelayState.objects.filter(key=OUTLOOK_KEY).update(value=outlooks)
    return [e for e in events if e is not None]
