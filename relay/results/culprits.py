"""Since which commit? For one backend, each job and each test failing at a trunk commit: the
last commit where it passed, the first where it failed, the commits between them (the
suspects, along the recorded pushes' first-parent chain) and how long the streak is.

The walk goes from the commit asked about towards older trunk commits. A commit where the job or
test has no decided result (not run, still running, not comparable) neither ends nor extends
the streak: it stays among the suspects when it lies between the last pass and the first
failure. Nightly reporters test a few trunk SHAs a day; their results sit on those SHAs, so the
range between two nightly SHAs falls out of the same walk.

Tests are matched across commits by relay.policy.testids identity (a missing module is filled in from
the same commit's other reports first). The cost is two or three indexed queries over at most
`CRCR_CULPRIT_WINDOW` commits, whatever the store's size, and two more for the open known issues
and expectations that mark a streak known (the baseline's triage of the start commit).

Since which commit has one answer (relay.results.bisections.since_which): the culprit a
bisection verified, else the first failing commit; the range is its evidence."""

from dataclasses import dataclass, field

from django.conf import settings

from relay.models import Bisection, Project, UpstreamCommit
from relay.policy.testids import TestId
from relay.policy.verdicts import FAILING, PASSING, job_key_label
from relay.stats.runkinds import trunk_commits
from relay.triage.classify import Match, triager_load

from .baseline import CellFailures, failure_kind, failures_load, reference_failures
from .bisections import Since, since_which
from .cells import Cell, cells_for_commits
from .triage import cell_triage, needs_messages

FAIL, PASS, UNKNOWN = "fail", "pass", "unknown"


@dataclass
class Streak:
    """One job or test of one backend, failing since `first_failing`."""

    kind: str
    """"job" or "test"."""
    subject: str
    first_failing: UpstreamCommit
    last_passing: UpstreamCommit | None
    """None: it failed on every decided commit in the window (the culprit is older)."""
    suspects: list[UpstreamCommit] = field(default_factory=list)
    """Newest first: the commits after the last pass, up to and including the first failure."""
    failing_results: int = 0
    """Commits in the streak where it failed (commits without a result are not counted)."""
    identity: object = field(default=None, repr=False, compare=False)
    """The TestId of a test, the (workflow, job) key of a job."""
    vs_reference: str | None = None
    """On the commit the walk started from: shared (the reference fails it too), backend_only (the
    reference passed it) or not_comparable, by the baseline's rule; None for the reference itself."""
    known: Match | None = field(default=None, repr=False, compare=False)
    """The open known issue or expectation that accounts for it on the commit the walk started
    from (the baseline's triage): a known failure, not the backend's regression."""
    bisection: Bisection | None = field(default=None, repr=False, compare=False)
    """A test's bisection from this streak's last pass (relay/bisect), when the backend bisected it:
    what narrowed the suspects to one commit, or found the failure not reproducible."""

    @property
    def exact(self) -> bool:
        """One suspect: the culprit is known."""
        return self.last_passing is not None and len(self.suspects) == 1

    @property
    def since(self) -> Since:
        """Since which commit: the bisection's verified culprit, else the first failing commit."""
        return since_which(self.first_failing.sha, self.bisection)

    @property
    def culprit(self) -> UpstreamCommit | None:
        """The verified culprit's recorded commit (its title), when it is one of the suspects."""
        return next((c for c in self.suspects if c.sha == self.since.commit), None) if self.since.verified else None

    @property
    def compare_url(self) -> str:
        if self.last_passing is None:
            return ""
        return f"https://github.com/{settings.CRCR_UPSTREAM_REPO}/compare/{self.last_passing.sha}...{self.first_failing.sha}"

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "first_failing": self.first_failing.sha,
            "last_passing": self.last_passing.sha if self.last_passing else None,
            "suspects": [c.sha for c in self.suspects],
            "suspect_count": len(self.suspects),
            "failing_results": self.failing_results,
            "exact": self.exact,
            "compare_url": self.compare_url,
            "vs_reference": self.vs_reference,
            "bisection": _bisection_dict(self.bisection),
            "since": self.since.to_dict(),
            "known": _known_dict(self.known),
        }


def _known_dict(match: Match | None) -> dict | None:
    if match is None:
        return None
    issue = match.issue.pk if match.issue is not None else None
    return {"kind": match.kind, "issue": issue, "label": match.label, "url": match.url or None}


def _bisection_dict(bisection: Bisection | None) -> dict | None:
    if bisection is None:
        return None
    verified = bisection.state == Bisection.State.VERIFIED
    return {
        "id": bisection.pk,
        "state": bisection.state,
        "culprit": bisection.culprit_sha if verified else None,
        "verified": verified,
    }


# --- the trunk chain ------------------------------------------------------------------------------


def trunk_chain(start: UpstreamCommit | None = None, limit: int | None = None) -> list[UpstreamCommit]:
    """Trunk commits from `start` (default: the newest) back along first parents, newest first.
    Where a parent was never recorded, the next older recorded push continues the chain."""
    limit = limit or settings.CRCR_CULPRIT_WINDOW
    commits = trunk_commits()
    if start is not None:
        commits = commits.filter(landed_at__lte=start.landed_at)
    loaded = list(commits.order_by("-landed_at", "-id")[: limit * 2])
    if start is not None and all(c.sha != start.sha for c in loaded):
        loaded.insert(0, start)
    return _follow_parents(loaded, limit)


def _follow_parents(loaded: list[UpstreamCommit], limit: int) -> list[UpstreamCommit]:
    by_sha = {c.sha: c for c in loaded}
    chain, seen = [], set()
    current = loaded[0] if loaded else None
    while current is not None and len(chain) < limit:
        chain.append(current)
        seen.add(current.sha)
        parent = by_sha.get(current.parent_sha)
        current = parent if parent is not None and parent.sha not in seen else _next_older(loaded, current, seen)
    return chain


def _next_older(loaded: list[UpstreamCommit], current: UpstreamCommit, seen: set[str]) -> UpstreamCommit | None:
    return next((c for c in loaded if c.sha not in seen and c.landed_at <= current.landed_at), None)


# --- one backend ----------------------------------------------------------------------------------


@dataclass
class History:
    """One backend's results along a chain: a cell and its failing tests per commit."""

    chain: list[UpstreamCommit]
    cells: dict[str, Cell]
    failures: dict[str, CellFailures]


def history_load(project: Project, chain: list[UpstreamCommit]) -> History:
    shas = [c.sha for c in chain]
    cells = cells_for_commits(shas, [project])
    failures = {sha: failure for (sha, _), failure in failures_load(cells).items()}
    return History(chain, {sha: cell for (sha, _), cell in cells.items()}, failures)


def streaks(project: Project, start: UpstreamCommit | None = None, history: History | None = None) -> list[Streak]:
    """Every test of `project` failing at `start` (default: its newest trunk commit with a
    result), and every job failing there without a failing test, with the commit it has failed
    since and whether the reference shares it there. A job whose tests fail is answered by its
    tests: its own red streak may be older (an earlier upstream break) and would name a second
    culprit for the same failure. Jobs first, then tests, by name."""
    history = history or history_load(project, trunk_chain(start))
    index = _start_index(history, start)
    if index is None:
        return []
    failures = history.failures[history.chain[index].sha]
    jobs = [_walk(history, index, "job", key, _job_state) for key in failures.failing_jobs_without_tests()]
    tests = [_walk(history, index, "test", tid, _test_state) for tid in sorted(failures.tests)]
    found = [s for s in jobs + tests if s is not None]
    if not project.is_reference:
        _compare_with_reference(found, failures)
        _known_attach(project, found, failures)
        _bisections_attach(project, found)
    return found


def _known_attach(project: Project, found: list[Streak], failures: CellFailures) -> None:
    """Each streak's known issue or expectation, by the baseline's triage of the start commit."""
    if not found:
        return
    triager = triager_load({project.id})
    if needs_messages(triager):  # a message rule needs the messages the walk did not load
        failures = failures_load({"cell": failures.cell}, with_messages=True)["cell"]
    triage = cell_triage(failures, triager)
    for streak in found:
        streak.known = triage.match_for(streak.identity if streak.kind == "test" else streak.subject)


def _bisections_attach(project: Project, found: list[Streak]) -> None:
    """Each test streak's bisection from its last pass, the newest when there were several (one query)."""
    tested = [s for s in found if s.kind == "test" and s.last_passing is not None]
    if not tested:
        return
    rows = Bisection.objects.filter(project=project, good_sha__in={s.last_passing.sha for s in tested})
    newest = {}
    for bisection in rows.order_by("created_at", "id"):
        for test in bisection.tests:
            newest[bisection.good_sha, test["test_id"]] = bisection
    for streak in tested:
        streak.bisection = newest.get((streak.last_passing.sha, streak.subject))


def _compare_with_reference(found: list[Streak], failures: CellFailures) -> None:
    reference = reference_failures(failures.cell.sha)
    for streak in found:
        streak.vs_reference = failure_kind(streak.identity, reference)


def _start_index(history: History, start: UpstreamCommit | None) -> int | None:
    """The commit to start from: `start`, or the newest with a decided result."""
    for i, commit in enumerate(history.chain):
        if start is not None:
            if commit.sha == start.sha:
                return i
        elif history.cells[commit.sha].has_result and not history.cells[commit.sha].pending:
            return i
    return None


def _job_state(history: History, sha: str, key: tuple[str, str]) -> str:
    verdict = history.cells[sha].verdict_for(key)
    if verdict is None:
        return UNKNOWN
    return FAIL if verdict.state in FAILING else PASS if verdict.state in PASSING else UNKNOWN


def _test_state(history: History, sha: str, tid: TestId) -> str:
    passed = history.failures[sha].passed(tid)
    return FAIL if passed is False else PASS if passed else UNKNOWN


def _walk(history: History, index: int, kind: str, subject, state_of) -> Streak | None:
    """From the start commit back: failures extend the streak, the first pass ends it."""
    first_failing, failing, walked = None, 0, []
    for commit in history.chain[index:]:
        state = state_of(history, commit.sha, subject)
        if state == PASS:
            return _streak(kind, subject, first_failing, commit, failing, walked) if first_failing else None
        walked.append(commit)
        if state == FAIL:
            first_failing, failing = commit, failing + 1
    return _streak(kind, subject, first_failing, None, failing, walked) if first_failing else None


def _streak(kind, subject, first_failing, last_passing, failing, walked) -> Streak:
    """Suspects: from the first failure back to (not including) the last pass."""
    start = walked.index(first_failing)
    suspects = walked[start:] if last_passing is not None else [first_failing]
    name = job_key_label(subject) if kind == "job" else subject.full
    return Streak(kind, name, first_failing, last_passing, suspects, failing, identity=subject)


def commit_streaks(commit: UpstreamCommit | None, detail) -> dict[int, list[Streak]]:
    """Project id → streaks, for each backend failing on a trunk commit (the commit page)."""
    if commit is None or not commit.is_trunk:
        return {}
    chain = trunk_chain(commit)
    failing = [b.project for b in detail.backends if b.cell.failing]
    return {p.id: streaks(p, commit, history_load(p, chain)) for p in failing}
