"""The relay's health cards on /crcr: deliveries, dispatch, callbacks, the worker and sweeper,
and the health probe's card."""

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from hud.templatetags.hud_tags import ago, duration, percent
from relay.cache import soft_get, soft_set
from relay.health import HEARTBEAT_KEY, HEARTBEAT_STALE_AFTER
from relay.levels.windows import TABS, Window, stale_after
from relay.links import backend_path
from relay.models import Delivery, Dispatch, JobRun, Project, RelayState
from relay.probe import probe_heads, stuck_after
from relay.results.overdue import running_jobs_overdue


@dataclass
class HealthCard:
    key: str
    title: str
    state: str
    """healthy | degraded | no_data: a silent relay is never healthy."""
    headline: str
    detail: str
    freshness: str
    href: str = ""

    @property
    def state_label(self) -> str:
        return {"healthy": "Healthy", "degraded": "Degraded", "no_data": "No data"}[self.state]


DELIVERIES_STALE_AFTER = timedelta(hours=1)
"""Upstream opens and pushes PRs around the clock; an hour without a single webhook is an outage."""
CALLBACKS_STALE_AFTER = timedelta(hours=2)
DISPATCH_SUCCESS_TARGET = 0.95


def health_cards(
    tallies: dict, probe: Project | None, window: Window, tab: str, since: datetime, now: datetime, alerts: list
) -> list[HealthCard]:
    """`alerts`: the relay's health alerts as /crcr reads them (relay.alerts.alert_statuses), all the probe's."""
    return [
        probe_card(probe, tab, stale_after(window, tab), now, alerts),
        deliveries_card(since, window, now),
        dispatch_card(since, window, now),
        callbacks_card(tallies, window, now),
        sweeper_card(tallies, now),
    ]


def _freshness(last: datetime | None, stale: timedelta, now: datetime) -> str:
    limit = duration(stale.total_seconds())
    return f"never seen · stale after {limit}" if last is None else f"last {ago(last, now)} · stale after {limit}"


def _silence_state(last: datetime | None, stale: timedelta, now: datetime, ok: bool = True) -> str:
    if last is None:
        return "no_data"
    return "healthy" if ok and now - last <= stale else "degraded"


def deliveries_card(since: datetime, window: Window, now: datetime) -> HealthCard:
    received = Delivery.objects.filter(received_at__gte=since).count()
    last = Delivery.objects.order_by("-received_at").values_list("received_at", flat=True).first()
    state = _silence_state(last, DELIVERIES_STALE_AFTER, now)
    return HealthCard(
        "deliveries",
        "Webhook deliveries",
        state,
        f"{received:,} received",
        f"{window.label.lower()}",
        _freshness(last, DELIVERIES_STALE_AFTER, now),
        "/relay/deliveries",
    )


DISPATCH_STATES_SECONDS = 60
"""The window's dispatches by backend and state: one scan of every dispatch in the window (a
quarter of a second at a million jobs), so it is shared this long, like the current hour's tallies."""


def dispatch_states(since: datetime) -> Counter:
    """Counter({(project_id, state): n}) of the dispatches created since `since` (a bucket start,
    so the key repeats for a whole hour or day)."""
    key = f"hud:dispatch-states:v1:{since:%Y%m%d%H}"
    states = soft_get(key)
    if states is None:
        rows = Dispatch.objects.filter(created_at__gte=since).order_by().values_list("project_id", "state")
        states = Counter({(project_id, state): n for project_id, state, n in rows.annotate(n=Count("id"))})
        soft_set(key, states, DISPATCH_STATES_SECONDS)
    return states


def dispatch_card(since: datetime, window: Window, now: datetime) -> HealthCard:
    states = Counter()
    for (_, state), n in dispatch_states(since).items():
        states[state] += n
    tried = states["sent"] + states["failed"]
    rate = states["sent"] / tried if tried else None
    last = _last_sent_at()
    state = _silence_state(last, DELIVERIES_STALE_AFTER, now, ok=rate is None or rate >= DISPATCH_SUCCESS_TARGET)
    if not tried:
        state = "no_data" if last is None else "degraded"
    detail = f"{states['sent']:,} sent · {states['failed']:,} failed · {states['pending'] + states['retrying']:,} open · {states['not_installed']:,} not installed"
    return HealthCard(
        "dispatch",
        "Dispatch success",
        state,
        percent(rate),
        detail,
        _freshness(last, DELIVERIES_STALE_AFTER, now) + f" · target ≥ {DISPATCH_SUCCESS_TARGET:.0%}",
        "/relay/deliveries?status=failed",
    )


def _last_sent_at() -> datetime | None:
    """From the newest dispatches by primary key (no scan): they are sent seconds after creation."""
    recent = Dispatch.objects.order_by("-id").values_list("state", "sent_at")[:200]
    return next((sent_at for state, sent_at in recent if state == Dispatch.State.SENT), None)


def callbacks_card(tallies: dict, window: Window, now: datetime) -> HealthCard:
    accepted = sum(t.callbacks for t in tallies.values())
    # Newest by id (creation order): robust to any plan; by created_at SQLite with statistics sorted the table.
    last = JobRun.objects.filter(ended_by="").order_by("-id").values_list("updated_at", flat=True).first()
    state = _silence_state(last, CALLBACKS_STALE_AFTER, now)
    return HealthCard(
        "callbacks",
        "Callbacks accepted",
        state,
        f"{accepted:,}",
        f"in_progress + completed, {window.label.lower()}",
        _freshness(last, CALLBACKS_STALE_AFTER, now),
    )


def sweeper_card(tallies: dict, now: datetime) -> HealthCard:
    """Overdue: still running past the job's expected duration (relay.results.overdue), before the sweeper
    times it out. Stuck: running past the timeout and its grace, which the sweeper should have
    ended; only that makes the card degraded."""
    swept = sum((t.swept for t in tallies.values()), Counter())
    beat = RelayState.objects.filter(key=HEARTBEAT_KEY).values_list("updated_at", flat=True).first()
    overdue, stuck = len(running_jobs_overdue(now=now)), overdue_jobs().count()
    state = _silence_state(beat, HEARTBEAT_STALE_AFTER, now, ok=stuck == 0)
    headline = f"{overdue:,} overdue" if overdue else "none overdue"
    detail = f"swept: {swept['timed_out']:,} timed out · {swept['never_started']:,} never started · {swept['superseded']:,} superseded"
    if stuck:
        detail = f"{stuck:,} stuck past the {settings.CRCR_JOB_TIMEOUT_HOURS:g} h timeout · " + detail
    return HealthCard(
        "sweeper",
        "Worker and sweeper",
        state,
        headline,
        detail,
        "worker heartbeat " + _freshness(beat, HEARTBEAT_STALE_AFTER, now),
    )


def overdue_jobs(project: Project | None = None):
    cutoff = timezone.now() - stuck_after()
    jobs = JobRun.objects.filter(status=JobRun.Status.IN_PROGRESS, in_progress_at__lt=cutoff)
    return jobs.filter(project=project) if project else jobs


def probe_card(probe: Project | None, tab: str, stale: timedelta, now: datetime, alerts: list) -> HealthCard:
    title = "Relay health probe" + ("" if tab == "pr" else f" · {TABS[tab].lower()}")
    if probe is None:
        return HealthCard("probe", title, "no_data", "No probe", "no project is marked as the health probe", "")
    href = backend_path(probe.full_name, event=None if tab == "pr" else tab)
    heads = probe_heads(probe, tab, now)
    decided = [h for h in heads if h.state != "running"]
    last = heads[0].last_at if heads else None
    overdue = overdue_jobs(probe).count()
    firing = [a.label for a in alerts if a.state == "firing"]
    ok = bool(decided) and all(h.state == "pass" for h in decided) and not overdue and not firing
    state = _silence_state(last, stale, now, ok=ok)
    detail = f"{sum(h.state == 'pass' for h in decided)}/{len(decided)} recent heads passed · {probe.full_name}"
    if overdue:
        detail += f" · {overdue} job(s) stuck in progress"
    if firing:
        detail += f" · alert firing: {', '.join(firing)}"
    headline = {"healthy": "All passing", "degraded": "Failing or silent", "no_data": "No results"}[state]
    headline = "Alert firing" if firing and state == "degraded" else headline
    return HealthCard("probe", title, state, headline, detail, _freshness(last, stale, now), href)
