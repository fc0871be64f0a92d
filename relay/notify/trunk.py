"""Events about results on trunk, detected from the results read model (relay.results) the way the
pages read them, each recorded once (by key) through event_emit:

* **new_failure** (backend, commit): the backend fails tests or jobs the reference passes
  (backend-specific, known issues and expected failures left out, and tests the test store
  holds flaky or muted on that backend: a flake is no regression) that it did not fail before:
  their streak starts at this commit. With the culprit range: last pass, first failure, suspects.
* **recovery** (backend, commit): passing again where its previous decided trunk result failed,
  after a new_failure was announced for it (a flaky blip nobody heard about is no news).
* **upstream_broken** (commit): the reference failed where its previous decided result did not.

Only trunk cells that got a result since the last run (plus a short overlap) are read, so the cost
follows new results, not history. The beat job that runs this (relay.levels.events.events_detect) adds the
readiness and health events, which need what only the HUD computes."""

from datetime import timedelta

from django.db.models import Max
from django.utils import timezone

from relay.ops.watermarks import watermark_move, watermark_read
from relay.policy.links import commit_path, public_url, short_sha
from relay.policy.verdicts import PASSING
from relay.stats.runkinds import trunk_commits

from ..models import JobRun, Level, NotificationEvent, Project, UpstreamCommit
from ..results.baseline import BACKEND, MIXED, commit_baseline
from ..results.cells import cells_for_commits, reference_backend, registered_backends
from ..results.culprits import streaks, trunk_chain
from ..results.tests import states_for
from .events import event_emit

Kind = NotificationEvent.Kind
WATERMARK_KEY = "notify-events-watermark"
OVERLAP = timedelta(minutes=5)
FIRST_LOOKBACK = timedelta(hours=6)
MAX_COMMITS = 30


def trunk_events_detect(now) -> list[NotificationEvent]:
    """The trunk events since the last run's watermark, which then moves to `now`."""
    events = trunk_events(watermark_read(WATERMARK_KEY, now, FIRST_LOOKBACK, OVERLAP))
    watermark_move(WATERMARK_KEY, now)
    return events


def trunk_events(since) -> list[NotificationEvent]:
    """Every trunk commit with a result recorded since `since`, oldest first."""
    touched = (
        JobRun.objects.filter(updated_at__gte=since)
        .exclude(head_sha="")
        .values("head_sha")
        .annotate(last=Max("updated_at"))
    )
    shas = {row["head_sha"] for row in touched[:2000]}
    commits = list(trunk_commits().filter(sha__in=shas).order_by("landed_at")[:MAX_COMMITS])
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
    tests = {t.test_id for t in comparison.backend_only}
    states = states_for({(project.id, test) for test in tests})
    quiet = {test for (_, test), state in states.items() if state.flaky or state.muted}
    backend_only = (tests - quiet) | set(comparison.job_level_failures)
    new = [s for s in streaks(project, commit) if s.subject in backend_only and s.first_failing.sha == commit.sha]
    if not new:
        return None
    subjects = [s.subject for s in new]
    ranges = [s.to_dict() for s in new]
    first = new[0]
    culprit = (
        f"culprit {short_sha(first.first_failing.sha)}"
        if first.exact
        else f"{len(first.suspects)} suspects since {short_sha(first.last_passing.sha)}"
        if first.last_passing
        else "no pass in the window"
    )
    title = f"{project.label}: {len(subjects)} new backend-specific failure{'s' if len(subjects) != 1 else ''} on trunk at {short_sha(commit.sha)} ({culprit})"
    lines = [
        f"{s.subject}: "
        + (
            f"last passed {short_sha(s.last_passing.sha)}, {len(s.suspects)} suspect(s) {s.compare_url}"
            if s.last_passing
            else "no pass in the window"
        )
        for s in new[:20]
    ]
    details = {
        "url": public_url(commit_path(commit.sha, project.id)),
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
    title = f"{project.label} passes again on trunk at {short_sha(commit.sha)}"
    details = {
        "url": public_url(commit_path(commit.sha, project.id)),
        "commit_title": commit.title,
        "lines": [f"{short_sha(commit.sha)} {commit.title}"],
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
    reference = reference_backend(list(projects.values()))
    if not baseline.upstream_broken or reference is None or previous.get(reference.id) == "failing":
        return None
    failing = [t.test_id for t in baseline.reference_failures]
    title = f"Upstream broke the reference ({reference.label}) at {short_sha(commit.sha)}: {commit.title[:120]}"
    details = {
        "url": public_url(commit_path(commit.sha)),
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
