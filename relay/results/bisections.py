"""Bisections as every page, the API and the notifications read them (relay/bisect writes them):
which bisections name a commit, a backend, a test or an upstream PR, and the one sentence that
says what each found ("verified culprit of test_add on Ascend, bisected over 17 commits in 5
runs")."""

from dataclasses import dataclass

from django.db.models import Q

from relay.models import Bisection, BisectProbe, Level, UpstreamCommit
from relay.models.bisection import levels_prime
from relay.policy.links import bisection_api_path, commit_path

from .heads import landed_commits, landed_pr

RECENT = 200
"""A test's bisections are read among the newest this many (a bisection's tests are JSON)."""
NAMING = (Bisection.State.VERIFIED,)
"""The one ending that names a commit: verified (fails with it, passes on its parent). A suspect
that did not reproduce is named nowhere as a culprit."""
PROBES_READ = 200
"""Probes read for one commit at the most (a commit is tried once a search, twice to verify)."""
PROBE_OUTCOMES = {BisectProbe.Outcome.FAIL: "✗ failed", BisectProbe.Outcome.PASS: "✓ passed"}
"""A decided probe's outcome in words, with the glyph that is not its colour alone."""
UPSTREAM_TRUSTED = (Level.L3, Level.L4)
"""The levels upstream trusts with check runs: only a culprit their probes verified is shown on
the upstream author's PR page and reaches subscribers beyond the backend's own."""


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
    def upstream_trusted(self) -> bool:
        """Whether the backend's word reaches the upstream author (its level: L3/L4)."""
        return self.bisection.level in UPSTREAM_TRUSTED

    @property
    def verified_by(self) -> dict | None:
        """Whose probes verified the culprit, at which level: a backend's own word, never upstream's."""
        if not self.verified:
            return None
        project = self.bisection.project
        return {"backend": project.full_name, "label": project.label, "level": self.bisection.level}

    @property
    def search_runs(self) -> int:
        return sum(p.role == BisectProbe.Role.SEARCH for p in self.probes)

    @property
    def api_url(self) -> str:
        return bisection_api_path(self.bisection.pk)

    @property
    def culprit(self) -> str:
        """The commit it names: its culprit once verified, else none (a suspect that did not
        reproduce, or a search still going, accuses nobody)."""
        return self.bisection.culprit_sha if self.verified else ""

    @property
    def culprit_url(self) -> str:
        return commit_path(self.culprit, self.bisection.project_id) if self.culprit else ""


@dataclass(frozen=True)
class Since:
    """Since which commit a test fails on a backend: `commit` is the verified culprit when a
    bisection verified one (`bisection`), else the first failing commit the results show (the
    range ends there). The range stays its evidence."""

    commit: str
    bisection: Bisection | None = None

    @property
    def verified(self) -> bool:
        return self.bisection is not None

    def to_dict(self) -> dict:
        b = self.bisection
        by = {"backend": b.project.full_name, "level": b.level} if b else None
        return {
            "commit": self.commit,
            "answer": "culprit" if b else "range",
            "bisection": b.pk if b else None,
            "verified_by": by,
        }


def since_which(first_failing: str, bisection: Bisection | None) -> Since:
    """The one answer to "since which commit": a verified culprit, else the range's first failure."""
    if bisection is not None and bisection.state in NAMING and bisection.culprit_sha:
        return Since(bisection.culprit_sha, bisection)
    return Since(first_failing)


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
        by = f"by {backend}'s own probes at {bisection.level}"
        return f"verified culprit of {tests} on {backend} ({by}), {over} (+{verify_runs} to verify)"
    if bisection.state == State.NOT_REPRODUCIBLE:
        return f"bisection of {tests} on {backend}: not reproducible, no culprit named ({over})"
    if bisection.running:
        return f"bisecting {tests} on {backend} over {k} commits: {search_runs + verify_runs} runs so far"
    return f"bisection of {tests} on {backend} ended {bisection.get_state_display()}: {bisection.note}"


def read(bisections) -> list[BisectionRead]:
    """Each bisection with its probes, its culprit's PR, its level and its sentence (four queries)."""
    bisections = list(bisections)
    levels_prime(bisections)
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
        pr = landed_pr(titles.get(b.culprit_sha, "")) if b.state in NAMING else None
        found.append(BisectionRead(b, mine, pr, sentence(b, search, len(mine) - search)))
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
        rows = rows.filter(culprit_sha__startswith=culprit.lower(), state__in=NAMING)
    return read(rows[:limit])


def bisection_found(pk: int) -> BisectionRead | None:
    found = read(_rows().filter(pk=pk))
    return found[0] if found else None


def culprits_of_commit(sha: str) -> list[BisectionRead]:
    """The bisections that verified this commit as their culprit."""
    return read(_rows().filter(culprit_sha=sha, state__in=NAMING))


def bisections_of_commit(sha: str) -> list[BisectionRead]:
    """What the commit page says: the bisections naming it, and those its failures started."""
    return read(_rows().filter(Q(culprit_sha=sha, state__in=NAMING) | Q(bad_sha=sha)))


def probes_on_commit(sha: str) -> dict[int, list[BisectProbe]]:
    """Backend id → the probes bisections ran on this commit, oldest first: a culprit (or any
    commit tried) no trunk run tested still shows what its bisection's runs there said."""
    return {pid: probes for (_, pid), probes in probes_on_commits([sha]).items()}


def probes_on_commits(shas: list[str], project_ids=None) -> dict[tuple[str, int], list[BisectProbe]]:
    """(sha, backend id) → the probes bisections ran there, oldest first (one query; at most
    PROBES_READ a commit): what a cell no counted run tested shows instead of nothing."""
    rows = BisectProbe.objects.filter(sha__in=shas).select_related("bisection__project").order_by("created_at", "id")
    if project_ids is not None:
        rows = rows.filter(project_id__in=project_ids)
    found: dict[tuple[str, int], list[BisectProbe]] = {}
    for probe in rows[: PROBES_READ * len(shas)]:
        found.setdefault((probe.sha, probe.project_id), []).append(probe)
    return found


def probes_said(probes: list[BisectProbe]) -> str:
    """ "search probe ✗ failed, culprit re-run ✗ failed": what a backend's probes on one commit
    said, in the words the commit page and the grid's cell give."""
    return ", ".join(f"{_probe_role(p)} {PROBE_OUTCOMES.get(p.outcome, p.get_outcome_display())}" for p in probes)


def probes_reading(probes: list[BisectProbe]) -> str:
    """The newest decided probe's outcome (fail or pass), or "" while none decided: the one
    mark a cell no counted run tested shows for its probes."""
    decided = [p.outcome for p in probes if p.outcome in PROBE_OUTCOMES]
    return decided[-1] if decided else ""


def _probe_role(probe: BisectProbe) -> str:
    return "search probe" if probe.role == BisectProbe.Role.SEARCH else probe.get_role_display()


def bisections_of_backend(project_id: int, limit: int = 10) -> list[BisectionRead]:
    return read(_rows().filter(project_id=project_id)[:limit])


def bisections_of_test(test_id: str) -> list[BisectionRead]:
    return read([b for b in _rows()[:RECENT] if any(t["test_id"] == test_id for t in b.tests)])


def culprits_landed_by(number: int) -> list[BisectionRead]:
    """Verified culprits that are the trunk commit this upstream PR landed, by a backend upstream
    trusts (L3/L4): an L2 backend's word stays on its own pages."""
    shas = [c.sha for c in landed_commits(number)]
    if not shas:
        return []
    return [found for found in read(_rows().filter(culprit_sha__in=shas, state__in=NAMING)) if found.upstream_trusted]
