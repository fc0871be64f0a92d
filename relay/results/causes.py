"""Failure causes as the pages and the API read them: clusters of failures by reason
(relay/teststore/causes.py), each with its impact over a window (tests, backends, commits, runs), whether
the reference fails through it too, and each backend's missing operators ranked by the tests
they fail. Reads only the version whose clustering is complete (`read_version`)."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Max, Min, OuterRef, Subquery, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from relay.models import CauseCommit, CauseHit, CauseRun, CauseTest, FailureCause, Project, RelayState
from relay.policy.reasons import VERSION
from relay.stats.runkinds import trunk_commits

DEFAULT_DAYS = 7
NEW_WITHIN = timedelta(days=2)
"""A cause first seen (on the backends asked about) this recently is new."""

STATE_KEY = "causes"
"""Where the clustering stands, in one RelayState row: each version's watermark over TestRun ids
(`v<N>`) and the newest version whose clustering of every stored failure is done (`complete`, the
one the pages read). Written by the test store's sweep (relay.teststore.causes)."""


def clustering_state() -> dict:
    row = RelayState.objects.filter(key=STATE_KEY).first()
    return dict(row.value) if row else {}


def read_version() -> int:
    """The version the pages read: the newest whose clustering of every stored failure is done
    (the current one on a store that never had another)."""
    return clustering_state().get("complete", VERSION)


MAX_DAYS = 90
KINDS = tuple(FailureCause.Kind.values)


@dataclass(frozen=True)
class CauseQuery:
    """What a list of causes is narrowed to; every field optional."""

    project_ids: tuple[int, ...] = ()
    kind: str = ""
    sha: str = ""
    operator: str = ""
    shared: bool | None = None
    """True: only causes the reference fails through too; False: only those it does not."""
    days: int = DEFAULT_DAYS
    limit: int = 100


@dataclass
class CauseRow:
    cause_id: int
    tests: int
    failures: int
    commits: int
    runs: int
    backends: list[Project]
    first_seen_at: datetime
    last_seen_at: datetime
    shared: bool
    """The reference fails through it too in the window."""
    reference_tests: int = 0
    new: bool = False
    """First seen (on the backends asked about) within NEW_WITHIN."""
    cause: FailureCause | None = None


def causes_listed(query: CauseQuery, now: datetime | None = None) -> list[CauseRow]:
    """The causes of the failures the query names, most tests first (new ones first when a
    backend is asked about)."""
    since = (now or timezone.now()) - timedelta(days=query.days)
    totals = _hit_totals(query, since) if query.sha else _totals(query, since)
    totals.sort(key=lambda t: (-t["tests"], -t["failures"], t["cause_id"]))
    ids = [t["cause_id"] for t in totals]
    reference = _reference_tests(ids, since)
    rows = [_row(t, reference, since) for t in totals]
    rows = [r for r in rows if query.shared is None or r.shared == query.shared]
    _fill(rows, query.project_ids, since, (now or timezone.now()) - NEW_WITHIN)
    if query.project_ids:
        rows.sort(key=lambda r: (not r.new, -r.tests, -r.failures))
    return rows[: query.limit]


def _hit_totals(query: CauseQuery, since) -> list[dict]:
    """Each cause's counts read from its hits: the definition the kept counts (_totals) answer
    the same as, and the cheap way for one commit's failures (an index range of its own)."""
    hits = _narrowed(CauseHit.objects.filter(created_at__gte=since), query)
    if query.sha:
        hits = hits.filter(sha=query.sha)
    return list(
        hits.values("cause_id").annotate(
            tests=Count("identity_id", distinct=True),
            failures=Count("id"),
            commits=Count("sha", distinct=True),
            runs=Count("job_run_id", distinct=True),
            last=Max("created_at"),
        )
    )


def _totals(query: CauseQuery, since) -> list[dict]:
    """The same counts from the rows kept beside the hits (relay/teststore/cause_counts.py): a run is in
    the window with its created_at, a commit or a test with its latest failure. One backend's
    commit is one row; across backends the same commit counts once."""
    runs = _narrowed(CauseRun.objects.filter(created_at__gte=since), query).values("cause_id")
    # COUNT(*), not of a column: PostgreSQL then counts from the backend's index alone
    totals = {
        t["cause_id"]: {**t, "commits": 0, "tests": 0}
        for t in runs.annotate(failures=Sum("failures"), runs=Count("*"), last=Max("created_at"))
    }
    one_backend = len(query.project_ids) == 1
    commits = _narrowed(CauseCommit.objects.filter(last_at__gte=since), query).values("cause_id")
    commits = commits.annotate(n=Count("*") if one_backend else Count("sha", distinct=True))
    tests = _narrowed(CauseTest.objects.filter(last_at__gte=since), query).values("cause_id")
    tests = tests.annotate(n=Count("*") if one_backend else Count("identity_id", distinct=True))
    for name, rows in (("commits", commits), ("tests", tests)):
        for row in rows:
            if row["cause_id"] in totals:  # else the sweep wrote it after the runs were read: next time
                totals[row["cause_id"]][name] = row["n"]
    return list(totals.values())


def _narrowed(rows, query: CauseQuery):
    """Hits or the rows kept beside them, narrowed as the query says (its commit aside)."""
    rows = rows.filter(version=read_version())
    if query.project_ids:
        rows = rows.filter(project_id__in=query.project_ids)
    if query.kind:
        rows = rows.filter(cause__kind=query.kind)
    if query.operator:
        rows = rows.filter(cause__operator=query.operator)
    return rows


def _reference_tests(cause_ids: list[int], since) -> dict[int, int]:
    """cause id → tests the reference failed through it in the window."""
    reference = Project.objects.reference()
    if reference is None or not cause_ids:
        return {}
    rows = CauseTest.objects.filter(
        version=read_version(), cause_id__in=cause_ids, project=reference, last_at__gte=since
    )
    return dict(rows.values("cause_id").annotate(n=Count("id")).values_list("cause_id", "n"))


def _row(total: dict, reference: dict[int, int], since) -> CauseRow:
    return CauseRow(
        cause_id=total["cause_id"],
        tests=total["tests"],
        failures=total["failures"],
        commits=total["commits"],
        runs=total["runs"],
        backends=[],
        first_seen_at=since,
        last_seen_at=total["last"],
        shared=reference.get(total["cause_id"], 0) > 0,
        reference_tests=reference.get(total["cause_id"], 0),
    )


def _fill(rows: list[CauseRow], project_ids: tuple[int, ...], since, new_since) -> None:
    """Each row's cause, its backends in the window, and when it was first seen (on the
    backends asked about, over all the store keeps): new when that is after `new_since`."""
    ids = [r.cause_id for r in rows]
    causes = FailureCause.objects.in_bulk(ids)
    pairs = list(
        CauseTest.objects.filter(version=read_version(), cause_id__in=ids, last_at__gte=since)
        .values_list("cause_id", "project_id")
        .distinct()
    )
    projects = Project.objects.in_bulk({pid for _, pid in pairs})
    by_cause: dict[int, list[Project]] = {}
    for cause_id, pid in pairs:
        if not projects[pid].is_reference:
            by_cause.setdefault(cause_id, []).append(projects[pid])
    first = _firsts(ids, project_ids)
    for row in rows:
        row.cause = causes[row.cause_id]
        row.backends = sorted(by_cause.get(row.cause_id, []), key=lambda p: p.full_name)
        row.first_seen_at = first.get(row.cause_id, row.cause.first_seen_at)
        row.new = row.first_seen_at >= new_since


def _firsts(cause_ids: list[int], project_ids: tuple[int, ...]) -> dict:
    """cause id → its earliest failure the store keeps (on these backends, if any): for one
    backend, one index probe per cause."""
    runs = CauseRun.objects.filter(cause_id=OuterRef("pk"))
    if project_ids:
        runs = runs.filter(project_id__in=project_ids)
    earliest = Subquery(runs.order_by("created_at").values("created_at")[:1])
    found = FailureCause.objects.filter(pk__in=cause_ids).annotate(at=earliest).values_list("pk", "at")
    return {pk: at for pk, at in found if at is not None}


# --- missing operators ------------------------------------------------------------------------------


@dataclass
class MissingOperator:
    rank: int
    operator: str
    cause_id: int
    tests: int
    commits: int
    reference_tests: int
    """Tests the reference fails through the same operator in the window (0: it does not)."""

    @property
    def reference_state(self) -> str:
        return f"missing on the reference too ({self.reference_tests} tests)" if self.reference_tests else "not failing"


def missing_operators(project: Project, days: int = DEFAULT_DAYS, now=None) -> list[MissingOperator]:
    """The backend's missing operators ranked by the tests they fail in the window, the
    reference's state beside each."""
    query = CauseQuery(project_ids=(project.pk,), kind=FailureCause.Kind.MISSING_OPERATOR, days=days, limit=500)
    rows = sorted(causes_listed(query, now), key=lambda r: (-r.tests, -r.commits, r.cause.operator))
    return [
        MissingOperator(n, r.cause.operator, r.cause.pk, r.tests, r.commits, r.reference_tests)
        for n, r in enumerate(rows, start=1)
    ]


# --- one cause ---------------------------------------------------------------------------------------


@dataclass
class CauseDetail:
    cause: FailureCause
    current: bool
    """Of the version the pages read (an older cluster still opens, marked as such)."""
    backends: list[dict] = field(default_factory=list)
    tests: list[dict] = field(default_factory=list)
    commits: list[dict] = field(default_factory=list)
    runs: int = 0
    shared: bool = False
    trend: dict = field(default_factory=dict)
    """{"days": [...], "series": {backend name: [failures per day]}} over the window."""


MAX_LISTED = 200


def cause_found(cause_id: int, days: int = DEFAULT_DAYS * 2, now=None) -> CauseDetail | None:
    cause = FailureCause.objects.filter(pk=cause_id).first()
    if cause is None:
        return None
    now = now or timezone.now()
    hits = CauseHit.objects.filter(cause=cause)
    reference = Project.objects.reference()
    detail = CauseDetail(cause, cause.version == read_version())
    detail.backends = list(
        hits.values("project__full_name", "project__display_name", "project__is_reference")
        .annotate(tests=Count("identity_id", distinct=True), last=Max("created_at"), first=Min("created_at"))
        .order_by("-tests", "project__full_name")
    )
    detail.tests = list(
        hits.values("identity__identity")
        .annotate(backends=Count("project_id", distinct=True), failures=Count("id"), last=Max("created_at"))
        .order_by("-failures", "identity__identity")[:MAX_LISTED]
    )
    detail.commits = list(
        hits.values("sha")
        .annotate(tests=Count("identity_id", distinct=True), at=Min("created_at"))
        .order_by("-at")[:MAX_LISTED]
    )
    detail.runs = hits.values("job_run_id").distinct().count()
    detail.shared = reference is not None and hits.filter(project=reference).exists()
    detail.trend = _trend(hits, now, days)
    return detail


def _trend(hits, now, days: int) -> dict:
    start = (now - timedelta(days=days - 1)).date()
    day_list = [start + timedelta(days=n) for n in range(days)]
    series: dict[str, list[int]] = {}
    rows = (
        hits.filter(created_at__date__gte=start)
        .annotate(day=TruncDate("created_at"))
        .values("project__full_name", "day")
        .annotate(n=Count("identity_id", distinct=True))
    )
    for row in rows:
        counts = series.setdefault(row["project__full_name"], [0] * days)
        counts[(row["day"] - start).days] = row["n"]
    return {"days": [d.isoformat() for d in day_list], "series": dict(sorted(series.items()))}


# --- a commit's failures by cause -------------------------------------------------------------------


@dataclass
class CommitCause:
    cause: FailureCause
    backends: dict[str, list[str]]
    """backend full name → the test identities failing there through this cause (capped)."""
    tests: int
    reference: bool
    """The reference fails through it on this commit too."""


MAX_TESTS_SHOWN = 20


def commit_causes(sha: str) -> list[CommitCause]:
    """The failures stored for this commit (every backend, every attempt) grouped by cause, the
    cause failing the most tests first."""
    rows = (
        CauseHit.objects.filter(sha=sha, version=read_version())
        .values_list("cause_id", "project__full_name", "project__is_reference", "identity__identity")
        .distinct()
        .order_by("cause_id", "project__full_name", "identity__identity")
    )
    grouped: dict[int, CommitCause] = {}
    causes = {}
    for cause_id, backend, is_reference, identity in rows:
        group = grouped.get(cause_id)
        if group is None:
            causes[cause_id] = None
            group = grouped[cause_id] = CommitCause(None, {}, 0, False)
        group.reference = group.reference or is_reference
        tests = group.backends.setdefault(backend, [])
        if len(tests) < MAX_TESTS_SHOWN:
            tests.append(identity)
        group.tests += 1
    found = FailureCause.objects.in_bulk(list(causes))
    for cause_id, group in grouped.items():
        group.cause = found[cause_id]
    return sorted(grouped.values(), key=lambda g: (-g.tests, g.cause.pk))


# --- a backend's causes against its issue thresholds ------------------------------------------------


@dataclass
class Impact:
    cause_id: int
    tests: int
    trunk_commits: int
    first_trunk_sha: str
    reference_tests: int = 0


def backend_impacts(project: Project, since) -> dict[int, Impact]:
    """cause id → what it did on this backend since `since`: distinct tests, trunk commits
    (upstream commits the relay knows as trunk) and the first of them."""
    hits = CauseHit.objects.filter(project=project, version=read_version(), created_at__gte=since)
    tests = dict(hits.values("cause_id").annotate(n=Count("identity_id", distinct=True)).values_list("cause_id", "n"))
    trunk = hits.filter(sha__in=trunk_commits().values("sha"))
    firsts: dict[int, tuple] = {}
    commits: dict[int, set[str]] = {}
    for cause_id, sha, at in (
        trunk.values("cause_id", "sha").annotate(at=Min("created_at")).values_list("cause_id", "sha", "at")
    ):
        commits.setdefault(cause_id, set()).add(sha)
        if cause_id not in firsts or at < firsts[cause_id][0]:
            firsts[cause_id] = (at, sha)
    reference = _reference_tests(list(tests), since)
    return {
        cid: Impact(cid, n, len(commits.get(cid, ())), firsts.get(cid, (None, ""))[1], reference.get(cid, 0))
        for cid, n in tests.items()
    }


def backend_cause_tests(project: Project, cause_id: int, since, limit: int = 30) -> list[str]:
    """The tests failing through one cause on one backend since `since`, by name."""
    hits = CauseHit.objects.filter(project=project, cause_id=cause_id, created_at__gte=since)
    return list(hits.values_list("identity__identity", flat=True).distinct().order_by("identity__identity")[:limit])
