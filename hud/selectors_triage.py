"""Reads for the triage pages: known issues and their occurrences, suggested issues (a test
failing on two or more backends that no known issue covers, grouped, with its culprit range),
and expected failures that keep passing."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime

from django.conf import settings
from django.db.models import Count, Max, Min

from relay.models import Expectation, IssueOccurrence, KnownIssue, Level, Project, UpstreamCommit
from relay.policy.testids import TestId
from relay.results.baseline import failures_load
from relay.results.cells import (
    cells_for_commits,
    reference_backend,
    registered_backends,
)
from relay.results.culprits import Streak, history_load, streaks, trunk_chain
from relay.results.triage import cells_triage
from relay.triage.expectations import FAIL, PASS, UNKNOWN, passing_streak
from relay.triage.issues import still_occurring
from relay.triage.matching import id_matches

SUGGESTION_COMMITS = 10
"""Suggestions look at the newest trunk commits."""
SUGGESTIONS_SHOWN = 30
OCCURRENCES_SHOWN = 200


# --- known issues ---------------------------------------------------------------------------------


@dataclass
class IssueRow:
    issue: KnownIssue
    occurrences: int
    last_seen: datetime | None
    since_resolved: int

    @property
    def flagged(self) -> bool:
        """Resolved, but its failures still happen."""
        return self.since_resolved > 0


def known_issues_list(state: str = "") -> list[IssueRow]:
    issues = KnownIssue.objects.prefetch_related("projects").annotate(
        n=Count("occurrences"), last=Max("occurrences__seen_at")
    )
    if state in KnownIssue.State.values:
        issues = issues.filter(state=state)
    return [IssueRow(i, i.n, i.last, still_occurring(i)) for i in issues.order_by("state", "-created_at")[:500]]


@dataclass
class BackendSeen:
    project: Project
    count: int
    first: datetime
    last: datetime


@dataclass
class IssuePage:
    issue: KnownIssue
    total: int
    since_resolved: int
    backends: list[BackendSeen]
    commits: list[dict]
    days: list[tuple[date, int]]
    recent: list[IssueOccurrence] = field(default_factory=list)

    @property
    def max_day(self) -> int:
        return max((n for _, n in self.days), default=0)


def known_issue_page(issue: KnownIssue) -> IssuePage:
    """Every occurrence summed up: per backend (first and last seen), per commit, per day."""
    occurrences = issue.occurrences.all()
    per_backend = (
        occurrences.values("project")
        .annotate(n=Count("id"), first=Min("seen_at"), last=Max("seen_at"))
        .order_by("-last")
    )
    projects = Project.objects.in_bulk([row["project"] for row in per_backend])
    backends = [BackendSeen(projects[row["project"]], row["n"], row["first"], row["last"]) for row in per_backend]
    commits = list(
        occurrences.values("head_sha")
        .annotate(n=Count("id"), first=Min("seen_at"), last=Max("seen_at"))
        .order_by("-last")[:100]
    )
    titles = dict(UpstreamCommit.objects.filter(sha__in=[c["head_sha"] for c in commits]).values_list("sha", "title"))
    for row in commits:
        row["title"] = titles.get(row["head_sha"], "")
    days = Counter(seen.date() for seen in occurrences.values_list("seen_at", flat=True)[:20_000])
    recent = list(occurrences.select_related("project")[:OCCURRENCES_SHOWN])
    return IssuePage(
        issue,
        occurrences.count(),
        still_occurring(issue),
        backends,
        commits,
        sorted(days.items(), reverse=True),
        recent,
    )


# --- suggestions ----------------------------------------------------------------------------------


@dataclass
class Suggestion:
    """Tests failing on the same backends, none covered by a known issue: one issue to make."""

    pattern: str
    tests: list[str]
    backends: list[Project]
    commit: UpstreamCommit
    reference_fails: bool
    streaks: list[tuple[Project, Streak]] = field(default_factory=list)

    @property
    def title(self) -> str:
        return f"{self.pattern} fails on {', '.join(p.label for p in self.backends)}"


def suggestions(limit: int = SUGGESTIONS_SHOWN) -> list[Suggestion]:
    """On the newest trunk commits: each normalised test failing on two or more backends with no
    known issue or expectation covering it, grouped by test class and backends; the culprit range
    (since which commit) per backend."""
    commits = trunk_chain(limit=SUGGESTION_COMMITS)
    projects = [p for p in registered_backends() if p.level != Level.L1]
    reference = reference_backend(projects)
    cells = cells_for_commits([c.sha for c in commits], projects)
    failing = [c for c in cells.values() if c.failing]
    failures = failures_load({(c.sha, c.project.id): c for c in failing}, with_messages=True)
    triage = cells_triage(failures, reference.id if reference else None)
    found = _shared_open_failures(commits, triage, failures, reference)
    return [_with_streaks(s) for s in _grouped(found)[:limit]]


def _shared_open_failures(commits, triage, failures, reference) -> dict[TestId, tuple]:
    """Test → (newest commit where ≥ 2 backends fail it, their project ids, reference fails)."""
    found: dict[TestId, tuple] = {}
    for commit in commits:
        on: dict[TestId, list] = {}
        for (sha, pid), cell_triage in triage.items():
            if sha == commit.sha:
                for tid in cell_triage.open_tests:
                    on.setdefault(tid, []).append(pid)
        ref = failures.get((commit.sha, reference.id)) if reference else None
        for tid, pids in on.items():
            if len(pids) >= 2 and tid not in found:
                found[tid] = (commit, tuple(sorted(pids)), bool(ref and ref.failing(tid)))
    return found


def _grouped(found: dict[TestId, tuple]) -> list[Suggestion]:
    groups: dict[tuple, list[TestId]] = {}
    for tid, (commit, pids, ref_fails) in found.items():
        cls = tid.key.rsplit(".", 1)[0] if "." in tid.key else tid.key
        groups.setdefault((tid.module, cls, commit.sha, pids, ref_fails), []).append(tid)
    projects = Project.objects.in_bulk({pid for key in groups for pid in key[3]})
    commits = {sha: commit for (commit, _, _) in found.values() for sha in [commit.sha]}
    result = []
    for (module, cls, sha, pids, ref_fails), tids in groups.items():
        pattern = tids[0].full if len(tids) == 1 else f"{module + '.' if module else ''}{cls}.*"
        result.append(
            Suggestion(pattern, sorted(t.full for t in tids), [projects[p] for p in pids], commits[sha], ref_fails)
        )
    result.sort(key=lambda s: (-len(s.backends), -s.commit.landed_at.timestamp(), s.pattern))
    return result


def _with_streaks(suggestion: Suggestion) -> Suggestion:
    """Since which commit, per backend: the streak of the first test of the group."""
    for project in suggestion.backends:
        first = suggestion.tests[0]
        found = next((s for s in streaks(project, suggestion.commit) if s.kind == "test" and s.subject == first), None)
        if found is not None:
            suggestion.streaks.append((project, found))
    return suggestion


# --- expectations ---------------------------------------------------------------------------------


@dataclass
class ExpectationRow:
    expectation: Expectation
    passing_streak: int
    threshold: int

    @property
    def unexpectedly_passing(self) -> bool:
        return self.expectation.kind == Expectation.Kind.FAIL and self.passing_streak >= self.threshold


def expectation_rows(project: Project) -> list[ExpectationRow]:
    """Each expected failure with how many trunk commits in a row it has passed (newest first)."""
    entries = list(project.expectations.order_by("line", "id"))
    if not entries:
        return []
    history = history_load(project, trunk_chain())
    states = {e.pk: [_pattern_state(history, c.sha, e.pattern) for c in history.chain] for e in entries}
    threshold = settings.CRCR_EXPECTATION_PASSES
    return [ExpectationRow(e, passing_streak(states[e.pk]), threshold) for e in entries]


def _pattern_state(history, sha: str, pattern: str) -> str:
    """fail: a failing test matches; pass: the backend finished with per-test results and none
    matches; unknown otherwise (no result, running, or job-level only)."""
    failures = history.failures[sha]
    if any(id_matches(pattern, tid) for tid in failures.tests):
        return FAIL
    if failures.cell.has_result and failures.per_test and failures.complete and not failures.job_level:
        return PASS
    return UNKNOWN


def unexpectedly_passing(projects: list[Project]) -> list[ExpectationRow]:
    """Every backend's expected failures that passed CRCR_EXPECTATION_PASSES trunk commits in a row."""
    with_lists = set(Expectation.objects.filter(project__in=projects).values_list("project_id", flat=True))
    return [row for p in projects if p.pk in with_lists for row in expectation_rows(p) if row.unexpectedly_passing]


ISSUE_STATES = tuple(KnownIssue.State.values)


def known_issue_find(pk: int) -> KnownIssue | None:
    return KnownIssue.objects.prefetch_related("projects").filter(pk=pk).first()


def backend_exists(pk: int) -> bool:
    return Project.objects.filter(pk=pk).exists()
