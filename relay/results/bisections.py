"""Bisections as every page, the API and the notifications read them (relay/bisect writes them):
which bisections name a commit, a backend, a test or an upstream PR, and the one sentence that
says what each found ("verified culprit of test_add on Ascend, bisected over 17 commits in 5
runs")."""

from dataclasses import dataclass

from django.db.models import Q

from relay.links import bisection_api_path, commit_path
from relay.models import Bisection, BisectProbe, UpstreamCommit

from .heads import landed_pr

RECENT = 200
"""A test's bisections are read among the newest this many (a bisection's tests are JSON)."""
SHOWN = (Bisection.State.VERIFIED, Bisection.State.NOT_REPRODUCIBLE)
"""The endings that name a commit: as the culprit, or as the suspect that did not reproduce."""


@dataclass(frozen=True)
class Probe:
    number: int
    role: str
    sha: str
    outcome: str
    dispatch_state: str
    created_at: object
    decided_at: object


@dataclass(frozen=True)
class BisectionRead:
    """One bisection with what it found, in words and in facts."""

    bisection: Bisection
    probes: list[Probe]
    culprit_pr: int | None
    sentence: str

    @property
    def verified(self) -> bool:
        return self.bisection.state == Bisection.State.VERIFIED

    @property
    def search_runs(self) -> int:
        return sum(p.role == BisectProbe.Role.SEARCH for p in self.probes)

    @property
    def api_url(self) -> str:
        return bisection_api_path(self.bisection.pk)

    @property
    def culprit_url(self) -> str:
        sha = self.bisection.culprit_sha
        return commit_path(sha, self.bisection.project_id) if sha else ""


def test_names(tests: list[dict]) -> str:
    """The first test's method, and how many more went red with it."""
    if not tests:
        return "its tests"
    first = tests[0]["test_id"].rsplit(".", 1)[-1]
    return first if len(tests) == 1 else f"{first} and {len(tests) - 1} more"


test_names.__test__ = False


def sentence(bisection: Bisection, search_runs: int, verify_runs: int) -> str:
    """What the bisection found, in the words every page and the notification use."""
    tests, backend, k = test_names(bisection.tests), bisection.project.label, len(bisection.commits)
    over = f"bisected over {k} commits in {search_runs} run{'s' * (search_runs != 1)}"
    State = Bisection.State
    if bisection.state == State.VERIFIED:
        return f"verified culprit of {tests} on {backend}, {over} (+{verify_runs} to verify)"
    if bisection.state == State.NOT_REPRODUCIBLE:
        return f"suspected culprit of {tests} on {backend}, not reproducible: {over}"
    if bisection.running:
        return f"bisecting {tests} on {backend} over {k} commits: {search_runs + verify_runs} runs so far"
    return f"bisection of {tests} on {backend} ended {bisection.get_state_display()}: {bisection.note}"


def read(bisections) -> list[BisectionRead]:
    """Each bisection with its probes, its culprit's PR and its sentence (three queries)."""
    bisections = list(bisections)
    probes = _probes_of([b.pk for b in bisections])
    titles = dict(
        UpstreamCommit.objects.filter(sha__in=[b.culprit_sha for b in bisections if b.culprit_sha]).values_list(
            "sha", "title"
        )
    )
    found = []
    for b in bisections:
        mine = probes.get(b.pk, [])
        search = sum(p.role == BisectProbe.Role.SEARCH for p in mine)
        found.append(
            BisectionRead(b, mine, landed_pr(titles.get(b.culprit_sha, "")), sentence(b, search, len(mine) - search))
        )
    return found


def _probes_of(ids: list[int]) -> dict[int, list[Probe]]:
    rows = BisectProbe.objects.filter(bisection_id__in=ids).select_related("dispatch").order_by("number")
    probes: dict[int, list[Probe]] = {}
    for p in rows:
        state = p.dispatch.state if p.dispatch else ""
        probes.setdefault(p.bisection_id, []).append(
            Probe(p.number, p.role, p.sha, p.outcome or "pending", state, p.created_at, p.decided_at)
        )
    return probes


def _rows():
    return Bisection.objects.select_related("project")


def bisections_listed(state: str = "", backend: str = "", culprit: str = "", limit: int = 100) -> list[BisectionRead]:
    """Newest first, narrowed by state, backend (owner/repo) and culprit SHA (a prefix of 7+)."""
    rows = _rows()
    if state:
        rows = rows.filter(state=state)
    if backend:
        rows = rows.filter(project__full_name__iexact=backend)
    if culprit:
        rows = rows.filter(culprit_sha__startswith=culprit.lower())
    return read(rows[:limit])


def bisection_found(pk: int) -> BisectionRead | None:
    found = read(_rows().filter(pk=pk))
    return found[0] if found else None


def culprits_of_commit(sha: str) -> list[BisectionRead]:
    """The bisections that ended naming this commit (verified or not reproducible)."""
    return read(_rows().filter(culprit_sha=sha, state__in=SHOWN))


def bisections_of_commit(sha: str) -> list[BisectionRead]:
    """What the commit page says: the bisections naming it, and those its failures started."""
    return read(_rows().filter(Q(culprit_sha=sha, state__in=SHOWN) | Q(bad_sha=sha)))


def bisections_of_backend(project_id: int, limit: int = 10) -> list[BisectionRead]:
    return read(_rows().filter(project_id=project_id)[:limit])


def bisections_of_test(test_id: str) -> list[BisectionRead]:
    return read([b for b in _rows()[:RECENT] if any(t["test_id"] == test_id for t in b.tests)])


def culprits_landed_by(number: int) -> list[BisectionRead]:
    """Bisections whose culprit is the trunk commit this upstream PR landed."""
    shas = [
        sha
        for sha, title in UpstreamCommit.objects.filter(is_trunk=True, title__endswith=f"(#{int(number)})").values_list(
            "sha", "title"
        )
        if landed_pr(title) == int(number)
    ]
    return read(_rows().filter(culprit_sha__in=shas, state__in=SHOWN)) if shas else []
