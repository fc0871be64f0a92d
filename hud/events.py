"""Detecting the events subscribers hear about from results on trunk, readiness and relay
health. It lives in the HUD because it needs what only the HUD computes (the baseline
comparison, "since which commit", readiness and the health cards) while relay must never import
hud; it records each event through relay.notify.events.event_emit, which dedupes by key and owes
each matching subscription one notification. A beat task runs it every minute over the trunk
cells that got a result since the last run (plus a short overlap), so its cost follows new
results, not history.

Events, each once (by key):
* **new_failure** (backend, commit): the backend fails tests or jobs the reference passes
  (backend-specific, known issues and expected failures left out) that it did not fail before:
  their streak starts at this commit. With the culprit range: last pass, first failure, suspects.
* **recovery** (backend, commit): passing again where its previous decided trunk result failed,
  after a new_failure was announced for it (a flaky blip nobody heard about is no news).
* **upstream_broken** (commit): the reference failed where its previous decided result did not.
* **at_risk** (backend, day): readiness turned to "at risk of demotion" because a criterion
  failed over the last 7 days (not merely for lack of data).
* **health_degraded** (since when): the relay's health probe turned from healthy to degraded."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from relay.models import JobRun, Level, NotificationEvent, Project, RelayState, UpstreamCommit
from relay.notify.events import event_emit
from relay.verdicts import PASSING

from .baseline import BACKEND, MIXED, commit_baseline
from .culprits import streaks, trunk_chain
from .selectors_commit import cells_for_commits, registered_backends

logger = logging.getLogger(__name__)
Kind = NotificationEvent.Kind
WATERMARK_KEY = "notify-events-watermark"
OUTLOOK_KEY = "notify-readiness-outlooks"
HEALTH_KEY = "notify-relay-health"
OVERLAP = timedelta(minutes=5)
FIRST_LOOKBACK = timedelta(hours=6)
MAX_COMMITS = 30
READINESS_EVERY = timedelta(minutes=10)


def events_detect(now=None) -> list[NotificationEvent]:
    now = now or timezone.now()
    since = _watermark(now)
    events = trunk_events(since)
    events += readiness_events(now) + health_events(now)
    RelayState.objects.update_or_create(key=WATERMARK_KEY, defaults={"value": {"at": now.isoformat()}})
    return events


def _watermark(now):
    state = RelayState.objects.filter(key=WATERMARK_KEY).first()
    if state is None or not state.value.get("at"):
        return now - FIRST_LOOKBACK
    from django.utils.dateparse import parse_datetime

    return parse_datetime(state.value["at"]) - OVERLAP


# --- trunk ----------------------------------------------------------------------------------------


def trunk_events(since) -> list[NotificationEvent]:
    """Every trunk commit with a result recorded since `since`, oldest first."""
    touched = (
        JobRun.objects.filter(updated_at__gte=since)
        .exclude(head_sha="")
        .values("head_sha")
        .annotate(last=Max("updated_at"))
    )
    shas = {row["head_sha"] for row in touched[:2000]}
    commits = list(UpstreamCommit.objects.filter(sha__in=shas, is_trunk=True).order_by("landed_at")[:MAX_COMMITS])
    events = []
    for commit in commits:
        events += commit_events(commit)
    return [e for e in events if e is not None]


def commit_events(commit: UpstreamCommit) -> list:
    baseline = commit_baseline(commit.sha)
    projects = {p.id: p for p in registered_backends()}
    previous = _previous_decided(commit, list(projects.values()))
    events = [_upstream_broken(commit, baseline, previous, projects)]
    for comparison in baseline.backends:
        project = projects.get(comparison.project_id)
        if project is None or project.level == Level.L1:
            continue
        cell_state = comparison.state
        if comparison.mark in (BACKEND, MIXED):
            events.append(_new_failure(commit, project, comparison))
        elif cell_state in {s.value for s in PASSING} and previous.get(project.id) == "failing":
            events.append(_recovery(commit, project))
    return events


def _previous_decided(commit: UpstreamCommit, projects: list[Project]) -> dict[int, str]:
    """project id → "failing" or "passing" on its newest decided trunk result before `commit`."""
    chain = trunk_chain(commit, limit=20)[1:]
    cells = cells_for_commits([c.sha for c in chain], projects)
    found: dict[int, str] = {}
    for c in chain:
        for project in projects:
            cell = cells[(c.sha, project.id)]
            if project.id not in found and cell.has_result and not cell.pending:
                found[project.id] = "failing" if cell.failing else "passing"
    return found


def _new_failure(commit, project, comparison):
    """Only failures whose streak starts here are new; the event carries their culprit range."""
    backend_only = {t.test_id for t in comparison.backend_only} | set(comparison.job_level_failures)
    new = [s for s in streaks(project, commit) if s.subject in backend_only and s.first_failing.sha == commit.sha]
    if not new:
        return None
    subjects = [s.subject for s in new]
    ranges = [s.to_dict() for s in new]
    first = new[0]
    culprit = (
        f"culprit {first.first_failing.sha[:10]}"
        if first.exact
        else f"{len(first.suspects)} suspects since {first.last_passing.sha[:10]}"
        if first.last_passing
        else "no pass in the window"
    )
    title = f"{project.label}: {len(subjects)} new backend-specific failure{'s' if len(subjects) != 1 else ''} on trunk at {commit.sha[:10]} ({culprit})"
    lines = [
        f"{s.subject}: "
        + (
            f"last passed {s.last_passing.sha[:10]}, {len(s.suspects)} suspect(s) {s.compare_url}"
            if s.last_passing
            else "no pass in the window"
        )
        for s in new[:20]
    ]
    details = {
        "url": f"{settings.CRCR_PUBLIC_URL}/commit/{commit.sha}#backend-{project.id}",
        "culprit_ranges": ranges,
        "lines": lines,
        "commit_title": commit.title,
    }
    return event_emit(
        Kind.NEW_FAILURE,
        f"new_failure:{project.id}:{commit.sha}",
        title,
        project=project,
        head_sha=commit.sha,
        test_ids=subjects[:200],
        details=details,
    )


def _recovery(commit, project):
    """Only a backend whose failure we announced recovers: otherwise every flaky blip would page."""
    announced = NotificationEvent.objects.filter(
        project=project, kind__in=[Kind.NEW_FAILURE, Kind.RECOVERY], occurred_at__lte=timezone.now()
    )
    last = announced.order_by("-occurred_at", "-id").first()
    if last is None or last.kind != Kind.NEW_FAILURE:
        return None
    title = f"{project.label} passes again on trunk at {commit.sha[:10]}"
    details = {
        "url": f"{settings.CRCR_PUBLIC_URL}/commit/{commit.sha}#backend-{project.id}",
        "commit_title": commit.title,
        "lines": [f"{commit.sha[:10]} {commit.title}"],
    }
    return event_emit(
        Kind.RECOVERY,
        f"recovery:{project.id}:{commit.sha}",
        title,
        project=project,
        head_sha=commit.sha,
        details=details,
    )


def _upstream_broken(commit, baseline, previous, projects):
    reference = next((p for p in projects.values() if p.is_reference), None)
    if not baseline.upstream_broken or reference is None or previous.get(reference.id) == "failing":
        return None
    failing = [t.test_id for t in baseline.reference_failures]
    title = f"Upstream broke the reference ({reference.label}) at {commit.sha[:10]}: {commit.title[:120]}"
    details = {
        "url": f"{settings.CRCR_PUBLIC_URL}/commit/{commit.sha}",
        "lines": failing[:20] or baseline.reference_job_level_failures[:20],
    }
    return event_emit(
        Kind.UPSTREAM_BROKEN,
        f"upstream_broken:{commit.sha}",
        title,
        project=None,
        head_sha=commit.sha,
        test_ids=failing[:200],
        details=details,
    )


# --- readiness and health -------------------------------------------------------------------------


def readiness_events(now) -> list[NotificationEvent]:
    """Each L3/L4 backend whose readiness turned to "at risk of demotion" (every 10 minutes)."""
    state, _ = RelayState.objects.get_or_create(key=OUTLOOK_KEY, defaults={"value": {}})
    checked = state.value.get("_checked_at")
    if checked and now - _parse(checked) < READINESS_EVERY:
        return []
    from .selectors_backend import backend_readiness
    from .selectors_summary import TalliesPending

    outlooks, events = dict(state.value), []
    for project in Project.objects.filter(active=True, is_health_probe=False, level__in=[Level.L3, Level.L4]):
        try:
            readiness = backend_readiness(project, now)
        except TalliesPending:
            return []  # the tallies are still being computed: ask next time
        # "No data" never counts as met, but alone it says nothing new: a criterion must fail.
        at_risk = readiness.outlook == "at_risk" and any(c.met is False for c in readiness.demotion)
        if at_risk and outlooks.get(str(project.id)) != "at_risk":
            events.append(
                event_emit(
                    Kind.AT_RISK,
                    f"at_risk:{project.id}:{now.date()}",
                    f"{project.label}: {readiness.headline}",
                    project=project,
                    details={
                        "url": f"{settings.CRCR_PUBLIC_URL}/crcr/{project.full_name}",
                        "lines": [readiness.headline],
                    },
                )
            )
        outlooks[str(project.id)] = "at_risk" if at_risk else readiness.outlook
    outlooks["_checked_at"] = now.isoformat()
    RelayState.objects.filter(key=OUTLOOK_KEY).update(value=outlooks)
    return [e for e in events if e is not None]


def health_events(now) -> list[NotificationEvent]:
    """The relay's health probe card turned from healthy to degraded."""
    from .selectors_summary import DEFAULT_WINDOW, WINDOWS, probe_card, stale_after

    probe = Project.objects.filter(is_health_probe=True, active=True).first()
    card = probe_card(probe, "pr", stale_after(WINDOWS[DEFAULT_WINDOW], "pr"), now)
    state, _ = RelayState.objects.get_or_create(key=HEALTH_KEY, defaults={"value": {}})
    before = state.value.get("state")
    RelayState.objects.filter(key=HEALTH_KEY).update(value={"state": card.state, "at": now.isoformat()})
    if card.state != "degraded" or before != "healthy":
        return []
    event = event_emit(
        Kind.HEALTH_DEGRADED,
        f"health_degraded:{now.isoformat()}",
        f"Relay health degraded: {card.headline} ({card.detail})",
        details={"url": f"{settings.CRCR_PUBLIC_URL}/crcr", "lines": [card.detail, card.freshness]},
    )
    return [event] if event else []


def _parse(text: str):
    from django.utils.dateparse import parse_datetime

    return parse_datetime(text)
