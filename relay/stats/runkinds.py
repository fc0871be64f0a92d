"""Which job rows count, decided once: the vocabulary of run kinds, the one trunk rule, and one
table saying which kinds each figure counts. Every queryset and SQL filter that picks job rows is
derived from the table here (`counted_q`, `counted_sql`); nothing else restates it.

A row's kind follows from three facts: its event type, whether it answers a PR's closing
delivery, and whether its commit is on trunk (`on_trunk`: the relay's record of the commit pushed
to upstream's branch, the one trunk rule). Kinds partition the rows: each row has exactly one.

Public surface: `Kind`, `Figure`, `COUNTS` (the table), `kind_of`, `counts`, `counts_run`, `on_trunk`,
`trunk_shas`, `trunk_commits`, `pr_heads`, `jobs_counted`, `counted_q`, `commits_q`, `counted_sql`, `tab_of`, `tab_q`, `tab_sql`."""

from dataclasses import dataclass
from enum import StrEnum

from django.db.models import Exists, OuterRef, Q

from relay.models import BISECT_EVENT, SELF_REPORT_EVENTS, Delivery, Dispatch, JobRun, UpstreamCommit
from relay.models.deliveries import CLOSING

PUSH_EVENT = "push"
PR_EVENT = "pull_request"


class Kind(StrEnum):
    TRUNK_PUSH = "trunk push"
    """A push run: the relay's dispatch of a push to trunk (or of a `ciflow/trunk` tag, its PR's
    merge run), or upstream's own CI on a push."""
    PR_HEAD = "PR head"
    """A run of a PR's head (pull_request), or any other event a dispatch answers."""
    NIGHTLY = "nightly"
    """A backend's own nightly run on a trunk commit."""
    PERIODIC = "periodic"
    """A backend's own periodic run on a trunk commit."""
    PROBE = "bisection probe"
    """A bisection's probe: a question of ours about a commit, running only the tests asked about."""
    CLOSING = "closing dispatch"
    """A job answering the dispatch of a PR's closing: a clean-up downstream, not a test."""
    SELF_REPORT = "self-report off trunk"
    """A nightly or periodic self-report on a commit the relay has no trunk record of (its push
    missed, or not a trunk commit): it cannot be placed among trunk commits."""


class Figure(StrEnum):
    CELLS = "cells"
    VERDICTS = "verdicts"
    GATE = "gate"
    TALLIES = "tallies and pass rates"
    BACKEND_PAGE = "backend page tabs and head matrix"
    OCCURRENCES = "known-issue occurrences and their notifications"
    EXCUSED = "excused failures"
    E2E_P50 = "E2E P50"
    TEST_STREAKS = "test streaks"
    QUALITY = "quality figures"


@dataclass(frozen=True)
class Counted:
    kinds: frozenset[Kind]
    trunk_only: bool = False
    """Only rows of trunk commits (the test store's streaks and the quality figures read trunk)."""


_SELF_REPORTED = frozenset({Kind.NIGHTLY, Kind.PERIODIC, Kind.SELF_REPORT})
_PLACED = frozenset({Kind.TRUNK_PUSH, Kind.PR_HEAD, Kind.NIGHTLY, Kind.PERIODIC})
_REPORTED = _PLACED | {Kind.SELF_REPORT}

COUNTS: dict[Figure, Counted] = {
    # A commit's result: what the backend ran on it, placed where it belongs.
    Figure.CELLS: Counted(_PLACED),
    Figure.VERDICTS: Counted(_PLACED),
    # The merge gate judges a head as its verdicts do; what shows on the PR (check runs, the oncall
    # comment) is the runs it counts whatever the commit (`counts_run`): its dispatches' jobs.
    Figure.GATE: Counted(_PLACED),
    # Runs the backend reported, by tab: a self-report counts in its tab even off trunk. The level
    # criteria read these (and a backend's tenure starts at its first: relay.levels.readiness).
    Figure.TALLIES: Counted(_REPORTED),
    Figure.BACKEND_PAGE: Counted(_REPORTED),
    # A known issue is seen again in any run that tested something.
    Figure.OCCURRENCES: Counted(_REPORTED),
    # Only the pull-request tab's failures are excused (the adjusted pass rate is of that tab).
    Figure.EXCUSED: Counted(frozenset({Kind.TRUNK_PUSH, Kind.PR_HEAD})),
    # Upstream's definition: pull_request runs only.
    Figure.E2E_P50: Counted(frozenset({Kind.PR_HEAD})),
    # A PR carries its own change: only trunk commits say what the test does on trunk.
    Figure.TEST_STREAKS: Counted(_PLACED, trunk_only=True),
    Figure.QUALITY: Counted(_PLACED, trunk_only=True),
}
"""THE table: which kinds of run each figure counts. Probes and closing dispatches count nowhere."""


# --- the trunk rule ---------------------------------------------------------------------------------


def trunk_commits():
    """The commits the relay recorded pushed to upstream's trunk: the one trunk rule."""
    return UpstreamCommit.objects.filter(is_trunk=True)


def pr_heads():
    """The commits the relay knows as a PR's head and not on trunk."""
    return UpstreamCommit.objects.filter(is_trunk=False, pr_number__isnull=False)


def on_trunk(sha: str) -> bool:
    return trunk_commits().filter(sha=sha).exists()


def trunk_shas(shas) -> set[str]:
    return set(trunk_commits().filter(sha__in=list(shas)).values_list("sha", flat=True))


# --- a row's kind, in Python -------------------------------------------------------------------------


def kind_of(event_type: str, closing: bool, trunk: bool) -> Kind:
    if event_type == BISECT_EVENT:
        return Kind.PROBE
    if closing:
        return Kind.CLOSING
    if event_type in SELF_REPORT_EVENTS:
        return Kind(event_type) if trunk else Kind.SELF_REPORT  # Kind.NIGHTLY is "nightly", …
    return Kind.TRUNK_PUSH if event_type == PUSH_EVENT else Kind.PR_HEAD


def counts(figure: Figure, kind: Kind, trunk: bool) -> bool:
    counted = COUNTS[figure]
    return kind in counted.kinds and (trunk or not counted.trunk_only)


def counts_run(figure: Figure, event_type: str, closing: bool = False) -> bool:
    """Whether `figure` counts a run of this event whatever its commit: a writer on the hot path
    (a callback's reactions) knows no more, and for every figure that does not read trunk only the
    commit never changes the answer for a dispatched run."""
    return all(counts(figure, kind_of(event_type, closing, trunk), trunk) for trunk in (False, True))


def tab_of(event_type: str) -> str:
    """The summary and backend pages' tab of a row: a self-report's event type names its tab,
    anything else is `pr`."""
    return event_type if event_type in SELF_REPORT_EVENTS else "pr"


# --- the same, as a queryset filter ------------------------------------------------------------------


def _trunk_q(shas) -> Q:
    """A page of commits reads their few trunk SHAs once; a wide read asks per row by the index."""
    if shas is None:
        return Q(Exists(trunk_commits().filter(sha=OuterRef("head_sha"))))
    return Q(head_sha__in=trunk_commits().filter(sha__in=list(shas)).values("sha"))


def _closing_q(shas) -> Q:
    if shas is None:
        of_closing = {f"delivery__{field}": value for field, value in CLOSING.items()}
        closing = Dispatch.objects.filter(pk=OuterRef("dispatch_id"), **of_closing)
        return Q(Exists(closing))
    closings = Delivery.objects.closings().filter(head_sha__in=list(shas))
    return Q(dispatch__delivery_id__in=closings.values("pk"))


def _kind_q(kind: Kind, shas) -> Q:
    dispatched = ~Q(event_type=BISECT_EVENT) & ~_closing_q(shas)
    return {
        Kind.PROBE: Q(event_type=BISECT_EVENT),
        Kind.CLOSING: ~Q(event_type=BISECT_EVENT) & _closing_q(shas),
        Kind.NIGHTLY: Q(event_type="nightly") & _trunk_q(shas),
        Kind.PERIODIC: Q(event_type="periodic") & _trunk_q(shas),
        Kind.SELF_REPORT: Q(event_type__in=SELF_REPORT_EVENTS) & ~_trunk_q(shas),
        Kind.TRUNK_PUSH: Q(event_type=PUSH_EVENT) & dispatched,
        Kind.PR_HEAD: ~Q(event_type__in=[PUSH_EVENT, BISECT_EVENT, *SELF_REPORT_EVENTS]) & dispatched,
    }[kind]


def counted_q(figure: Figure, shas=None) -> Q:
    """JobRun rows `figure` counts. `shas`, when the caller reads only these commits, narrows the
    subqueries to them (the grid's loader reads a page of commits among millions of rows)."""
    counted = COUNTS[figure]
    left_out = [_kind_q(kind, shas) for kind in _left_out(counted.kinds)]
    left_out += [Q(event_type__in=SELF_REPORT_EVENTS)] if _self_reports(counted.kinds) == "out" else []
    q = ~_any(left_out) if left_out else Q()
    return q & _trunk_q(shas) if counted.trunk_only else q


def _self_reports(kinds) -> str:
    """'in' or 'out' when a figure counts every self-report or none, whatever its commit: then
    the trunk record need not be read for them."""
    family = kinds & _SELF_REPORTED
    return "in" if family == _SELF_REPORTED else "out" if not family else "some"


def _left_out(kinds) -> list[Kind]:
    """The kinds a figure leaves out, the self-reported ones only when it counts some of them."""
    whole = _self_reports(kinds) != "some"
    return [k for k in Kind if k not in kinds and not (whole and k in _SELF_REPORTED)]


def jobs_counted(figure: Figure, shas=None):
    """The JobRun rows `figure` counts (of these commits, when given)."""
    rows = JobRun.objects.filter(counted_q(figure, shas))
    return rows if shas is None else rows.filter(head_sha__in=list(shas))


def commits_q(figure: Figure, field: str = "sha") -> Q:
    """For rows kept per commit from the cells' runs (the test store's TestedCommit): the commits
    `figure` reads, trunk only when the table says so."""
    return Q(**{f"{field}__in": trunk_commits().values("sha")}) if COUNTS[figure].trunk_only else Q()


def _any(qs) -> Q:
    result = Q(pk__in=[])
    for q in qs:
        result |= q
    return result


def tab_q(tab: str) -> Q:
    """`tab_of` as a filter: a self-reported kind by its event type, `pr` as everything else."""
    return Q(event_type=tab) if tab in SELF_REPORT_EVENTS else ~Q(event_type__in=SELF_REPORT_EVENTS)


# --- the same, in SQL (the tallies' statements) ------------------------------------------------------


def _text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _in(values) -> str:
    return "(" + ", ".join(_text(v) for v in values) + ")"


def _closing_sql(alias: str) -> str:
    """Uncorrelated, so the database reads the closing dispatches once per statement (a hashed
    subplan on PostgreSQL, an ephemeral index on SQLite) instead of probing twice per row; never
    NULL (a self-report has no dispatch), so a NOT around it keeps that row."""
    delivery, dispatch = Delivery._meta.db_table, Dispatch._meta.db_table
    return (
        f"({alias}.dispatch_id IS NOT NULL AND {alias}.dispatch_id IN (SELECT kd.id FROM {dispatch} kd JOIN {delivery} kv"
        f" ON kv.id = kd.delivery_id WHERE kv.event = {_text(CLOSING['event'])} AND kv.action = {_text(CLOSING['action'])}))"
    )


def _trunk_sql(alias: str) -> str:
    return f"EXISTS (SELECT 1 FROM {UpstreamCommit._meta.db_table} kc WHERE kc.sha = {alias}.head_sha AND kc.is_trunk)"


def _kind_sql(kind: Kind, alias: str) -> str:
    event, probe, trunk = f"{alias}.event_type", _text(BISECT_EVENT), _trunk_sql(alias)
    dispatched = f"{event} <> {probe} AND NOT {_closing_sql(alias)}"
    return {
        Kind.PROBE: f"{event} = {probe}",
        Kind.CLOSING: f"{event} <> {probe} AND {_closing_sql(alias)}",
        Kind.NIGHTLY: f"{event} = 'nightly' AND {trunk}",
        Kind.PERIODIC: f"{event} = 'periodic' AND {trunk}",
        Kind.SELF_REPORT: f"{event} IN {_in(SELF_REPORT_EVENTS)} AND NOT {trunk}",
        Kind.TRUNK_PUSH: f"{event} = {_text(PUSH_EVENT)} AND {dispatched}",
        Kind.PR_HEAD: f"{event} NOT IN {_in([PUSH_EVENT, BISECT_EVENT, *SELF_REPORT_EVENTS])} AND {dispatched}",
    }[kind]


def counted_sql(figure: Figure, alias: str = "j") -> str:
    """`counted_q` as a SQL condition on the JobRun row `alias`."""
    counted = COUNTS[figure]
    left_out = [f"({_kind_sql(kind, alias)})" for kind in _left_out(counted.kinds)]
    if _self_reports(counted.kinds) == "out":
        left_out.append(f"{alias}.event_type IN {_in(SELF_REPORT_EVENTS)}")
    condition = f"NOT ({' OR '.join(left_out)})" if left_out else "1 = 1"
    return f"{condition} AND {_trunk_sql(alias)}" if counted.trunk_only else condition


def tab_sql(alias: str = "j") -> str:
    """`tab_of` in SQL."""
    whens = " ".join(f"WHEN {alias}.event_type = {_text(kind)} THEN {_text(kind)}" for kind in SELF_REPORT_EVENTS)
    return f"(CASE {whens} ELSE 'pr' END)"
