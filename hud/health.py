"""The relay's health cards on /crcr: deliveries, dispatch, callbacks, the worker and sweeper,
and the health probe's card."""

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from hud.templatetags.hud_tags import ago, duration, percent
from relay.health.healthz import HEARTBEAT_KEY, HEARTBEAT_STALE_AFTER
from relay.health.probe import probe_heads, stuck_after
from relay.models import Delivery, Dispatch, JobRun, Project, RelayState
from relay.ops.cache import soft_get, soft_set
from relay.policy.links import backend_path
from relay.results.overdue import running_jobs_overdue
from relay.stats.windows import TABS, Window, stale_after


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
    tallies: dict, probe: Project | None, window: Window, tab: str, since: datetime, now: datetime
) -> list[HealthCard]:
    """The relay's health alerts have their own panel on /crcr, each over its own window, so no
    card restates them (relay.health.alerts.alert_statuses)."""
    return [
        probe_card(probe, tab, stale_after(window, tab), now),
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
    # The headline is what the state is judged by (it read "Healthy · 1 overdue"): jobs stuck past
    # the timeout, which the sweeper should have ended; overdue ones are still within it.
    headline = f"{stuck:,} stuck past the {settings.CRCR_JOB_TIMEOUT_HOURS:g} h timeout" if stuck else "none stuck"
    detail = f"swept: {swept['timed_out']:,} timed out · {swept['never_started']:,} never started · {swept['superseded']:,} superseded"
    if overdue:
        detail = f"{overdue:,} running past its expected duration, within the timeout · " + detail
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


def probe_card(probe: Project | None, tab: str, stale: timedelta, now: datetime) -> HealthCard:
    """One window, one state: the probe's latest few heads of this kind (relay.health.probe.probe_heads)
    and its jobs stuck now. The health alerts, each over its own window, have their own panel:
    a card reading "Degraded · Alert firing · 3/3 recent heads passed" answered two windows at
    once. Heads still running, with none decided yet, are no data, not a failure."""
    title = "Relay health probe" + ("" if tab == "pr" else f" · {TABS[tab].lower()}")
    if probe is None:
        return HealthCard("probe", title, "no_data", "No probe", "no project is marked as the health probe", "")
    href = backend_path(probe.full_name, event=None if tab == "pr" else tab)
    heads = probe_heads(probe, tab, now)
    decided = [h for h in heads if h.state != "running"]
    last = heads[0].last_at if heads else None
    stuck = overdue_jobs(probe).count()
    passed = sum(h.state == "pass" for h in decided)
    state = _silence_state(last, stale, now, ok=passed == len(decided) and not stuck)
    if state == "healthy" and not decided:
        state = "no_data"
    headline = f"{passed} of the last {len(decided)} heads passed" if decided else "No head decided yet"
    detail = f"{len(heads) - len(decided)} running · {probe.full_name}"
    if stuck:
        headline, detail = f"{stuck} job{'s' if stuck != 1 else ''} stuck in progress", f"{headline} · {detail}"
    return HealthCard("probe", title, state, headline, detail, _freshness(last, stale, now), href)
