"""/crcr, the global summary, and the windowed tallies that every summary page aggregates from.

How the numbers are computed, and why this way
----------------------------------------------
Every aggregate follows relay.verdicts: the latest attempt per (head SHA, backend, kind of run, job)
decides, a pass after a failed attempt is flaky, superseded work counts nowhere. The SQL below is
*generated from* relay.verdicts (each conclusion / ended_by combination is judged by
`conclusion_state` itself), so there is still one policy; the SQL is its translation, and a test
checks both agree on random data.

Scanning a 30-day window per request is too slow: a million JobRun rows are ~1.4 GB in SQLite,
and one GROUP BY over them takes ~0.7 s before any latest-attempt logic. So the work is split into
time buckets (UTC hours for today and for the 24 h range, UTC days before that). Each hour is one
SQL statement that groups in the database (by job key, then by backend and state) and returns a
few hundred small rows, never a row per job; a day is its 24 hours merged. Buckets are cached for
as long as they can still change (`_bucket_ttl`); the merge of the settled ones is shared too, so
a warm request merges it with the few hot hours where jobs still run, recomputing only those that
expired. Measured on a
2-core machine, 1M jobs over 30 days in SQLite: warm /crcr renders in ~90 ms, ~100 ms in the minute
the newest hours are recomputed, ≤ ~280 ms if every hot hour expired at once. A cold cache takes
~11-16 s of SQL in total (720 hour statements), which requests spend in slices of
`COMPUTE_BUDGET_SECONDS` behind a loading state that fills itself in.

* A job (key) is dated by its first attempt: it belongs to the bucket holding its first attempt,
  and that bucket's query pulls every attempt of the key (later retries too) through the
  (head_sha, project) index, so "latest attempt" is exact even when a retry crosses midnight.
  Hour-sized statements also keep PostgreSQL on that index (at a day's size it misjudges the
  pairs and scans the whole table).
* Attempts are ordered as relay.verdicts orders them: runs by their first row's id (rows are
  inserted when first reported, so id order is arrival order), attempts within a run by
  `run_attempt` (a late callback of attempt 1 never overtakes attempt 2). One
  MAX(order * 32 + state) picks the latest attempt's state in the same pass, portably (SQLite
  and PostgreSQL, through a window function).
* Timings count every attempt (a retry queued and ran too). p50/p90 cannot be merged across
  buckets, so each bucket keeps histograms of queue, execution and end-to-end seconds over fixed
  edges; quantiles are interpolated within a bin (about ±12 %). The readiness thresholds (30 min,
  3 h) are bin edges, so those verdicts are exact; averages come from exact sums.
"""

import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from functools import cache as memoize

from django.conf import settings
from django.db import connection
from django.db.models import Count, Max, Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from relay.health import HEARTBEAT_KEY, HEARTBEAT_STALE_AFTER
from relay.models import Conclusion, Delivery, Dispatch, JobRun, Level, Project, RelayState
from relay.softcache import soft_get, soft_get_many, soft_set
from hud.overdue import running_jobs_overdue
from hud.readiness import PASS_RATE_MIN
from relay.verdicts import FAILING, STATES, Counts, Rates, State, conclusion_state, job_verdicts

logger = logging.getLogger(__name__)

# --- ranges and tabs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    key: str
    label: str
    days: int
    stale_after: timedelta
    """A backend with no result for this long is shown as stale (in words, not only colour)."""


WINDOWS = {
    "24h": Window("24h", "Last 24 hours", 1, timedelta(hours=6)),
    "7d": Window("7d", "Last 7 days", 7, timedelta(hours=24)),
    "30d": Window("30d", "Last 30 days", 30, timedelta(days=3)),
}
DEFAULT_WINDOW = "7d"

TABS = {"pr": "Pull requests", "nightly": "Nightly", "periodic": "Periodic"}
"""Kinds of run: `pr` is JobRun.event_type pull_request or push (anything not nightly/periodic)."""
DEFAULT_TAB = "pr"

NIGHTLY_STALE_AFTER = timedelta(hours=26)
"""Nightly and periodic backends report about once a day; a day and a bit of silence is stale."""


def kind_of(event_type: str) -> str:
    return event_type if event_type in ("nightly", "periodic") else "pr"


def stale_after(window: Window, tab: str) -> timedelta:
    return window.stale_after if tab == "pr" else max(window.stale_after, NIGHTLY_STALE_AFTER)


# --- the status policy, translated to SQL ----------------------------------------------------------

STATE_NUM = {state: number for number, state in enumerate(State)}
NUM_STATE = {number: state for state, number in STATE_NUM.items()}
_STATE_SLOTS = 32
"""latest = MAX(id * 32 + state number): the state rides along with the id that orders attempts."""


@dataclass
class _Attempt:
    """A stand-in row, to ask relay.verdicts how it judges a combination of columns."""

    status: str = "completed"
    conclusion: str = ""
    ended_by: str = ""
    run_attempt: int = 1
    workflow_name: str = ""
    job_name: str = ""


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@memoize
def state_case_sql(alias: str = "j") -> str:
    """CASE expression giving STATE_NUM[conclusion_state(row)] for a JobRun row."""
    num = lambda attempt: STATE_NUM[conclusion_state(attempt)]  # noqa: E731
    whens = [f"WHEN {alias}.status <> 'completed' THEN {num(_Attempt(status='in_progress'))}"]
    for ended_by in JobRun.EndedBy.values:
        verdicts = {num(_Attempt(conclusion=c, ended_by=ended_by)) for c in Conclusion.values}
        if len(verdicts) == 1:  # this ended_by decides on its own, whatever the conclusion says
            whens.append(f"WHEN {alias}.ended_by = {_sql_text(ended_by)} THEN {verdicts.pop()}")
    for value in Conclusion.values:
        whens.append(f"WHEN {alias}.conclusion = {_sql_text(value)} THEN {num(_Attempt(conclusion=value))}")
    fallback = num(_Attempt(conclusion="(unknown)"))
    return f"(CASE {' '.join(whens)} ELSE {fallback} END)"


KIND_SQL = "(CASE WHEN j.event_type = 'nightly' THEN 'nightly' WHEN j.event_type = 'periodic' THEN 'periodic' ELSE 'pr' END)"
_ATTEMPT_SLOTS = 1024
_ORDER_SQL = (
    f"(MIN(j.id) OVER (PARTITION BY j.project_id, j.head_sha, {KIND_SQL}, j.workflow_name, j.job_name, j.run_id)"
    f" * {_ATTEMPT_SLOTS} + CASE WHEN j.run_attempt >= {_ATTEMPT_SLOTS} THEN {_ATTEMPT_SLOTS - 1} ELSE j.run_attempt END)"
)
"""relay.verdicts' attempt order as one number: the run's first row id (runs by when they were
first seen), then run_attempt within the run."""

FAILING_NUMS = ", ".join(str(STATE_NUM[s]) for s in sorted(FAILING, key=STATE_NUM.get))

# --- histograms -------------------------------------------------------------------------------------

EDGES = (10, 20, 30, 45, 60, 90, 120, 180, 240, 300, 420, 600, 900, 1200, 1500, 1800, 2400, 3000, 3600,
         4500, 5400, 7200, 9000, 10800, 14400, 18000, 21600, 28800, 43200, 86400)
"""Bin upper edges in seconds (bin i holds [EDGES[i-1], EDGES[i]); the last bin is open). 30 min
and 3 h are edges so readiness verdicts at those thresholds are exact."""


def bin_case_sql(column: str) -> str:
    whens = " ".join(f"WHEN {column} < {edge} THEN {i}" for i, edge in enumerate(EDGES))
    return f"(CASE {whens} ELSE {len(EDGES)} END)"


@dataclass
class Histogram:
    counts: list = field(default_factory=lambda: [0] * (len(EDGES) + 1))
    total: float = 0.0

    @property
    def n(self) -> int:
        return sum(self.counts)

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    def add(self, bin_index: int, count: int, total: float) -> None:
        self.counts[bin_index] += count
        self.total += total or 0.0

    def merge(self, other: "Histogram") -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts)]
        self.total += other.total

    def quantile(self, q: float) -> float | None:
        """Interpolated within the bin that holds the q-th value; the open last bin gives its edge."""
        n = self.n
        if not n:
            return None
        rank, seen = q * n, 0
        for i, count in enumerate(self.counts):
            if count and seen + count >= rank:
                low = EDGES[i - 1] if i else 0
                if i == len(EDGES):
                    return float(low)
                return low + (EDGES[i] - low) * max(0.0, rank - seen) / count
            seen += count
        return float(EDGES[-1])

    def share_at_least(self, seconds: int) -> float | None:
        """Fraction of values ≥ `seconds`; exact when `seconds` is one of EDGES."""
        n = self.n
        if not n:
            return None
        first_bin = EDGES.index(seconds) + 1
        return sum(self.counts[first_bin:]) / n


# --- tallies ------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What one backend did in one kind of run over some buckets; merges by addition."""

    verdicts: Counter = field(default_factory=Counter)
    """State → number of jobs whose latest attempt ended so (FLAKY already split from SUCCESS)."""
    first_passed: int = 0
    attempts: int = 0
    in_progress_callbacks: int = 0
    completed_callbacks: int = 0
    swept: Counter = field(default_factory=Counter)
    queue: Histogram = field(default_factory=Histogram)
    execution: Histogram = field(default_factory=Histogram)
    e2e: Histogram = field(default_factory=Histogram)
    last_result_at: datetime | None = None

    def merge(self, other: "Tally") -> None:
        self.verdicts.update(other.verdicts)
        self.swept.update(other.swept)
        for name in ("first_passed", "attempts", "in_progress_callbacks", "completed_callbacks"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.queue.merge(other.queue)
        self.execution.merge(other.execution)
        self.e2e.merge(other.e2e)
        self.last_result_at = _latest(self.last_result_at, other.last_result_at)

    def count(self, *kinds: Counts) -> int:
        return sum(n for state, n in self.verdicts.items() if STATES[state].counts in kinds)

    @property
    def rates(self) -> Rates:
        passed, failed, infra, pending = (self.count(c) for c in (Counts.PASS, Counts.FAIL, Counts.INFRA, Counts.PENDING))
        return Rates(passed, failed, infra, pending, self.first_passed)

    @property
    def timed_out(self) -> int:
        return self.verdicts[State.TIMED_OUT]

    @property
    def never_started(self) -> int:
        return self.verdicts[State.NEVER_STARTED]

    @property
    def flaky(self) -> int:
        return self.verdicts[State.FLAKY]

    @property
    def callbacks(self) -> int:
        return self.in_progress_callbacks + self.completed_callbacks

    @property
    def timeout_rate(self) -> float | None:
        decided = self.rates.decided
        return (self.timed_out + self.never_started) / decided if decided else None


def _latest(a: datetime | None, b: datetime | None) -> datetime | None:
    return max(a, b) if a and b else a or b


def tally_sum(tallies) -> Tally:
    total = Tally()
    for tally in tallies:
        total.merge(tally)
    return total


def tallies_merge(parts) -> dict:
    """{(project_id, kind): Tally} from several such dicts, without touching the (cached) parts."""
    merged: dict = {}
    for part in parts:
        for key, tally in part.items():
            merged.setdefault(key, Tally()).merge(tally)
    return merged


# --- buckets ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bucket:
    start: datetime
    end: datetime

    @property
    def cache_key(self) -> str:
        size = "h" if self.end - self.start <= timedelta(hours=1) else "d"
        return f"hud:tally:v1:{size}:{self.start:%Y%m%d%H}"


def _floor_hour(moment: datetime) -> datetime:
    return moment.astimezone(dt_timezone.utc).replace(minute=0, second=0, microsecond=0)


def _floor_day(moment: datetime) -> datetime:
    return _floor_hour(moment).replace(hour=0)


def window_buckets(days: int, now: datetime) -> list[Bucket]:
    """1 day: the last 24 UTC hours (the current one partial). N days: N-1 whole UTC days, then
    today's hours so far."""
    hour = _floor_hour(now)
    if days <= 1:
        return [Bucket(hour - timedelta(hours=h), hour - timedelta(hours=h - 1)) for h in range(23, -1, -1)]
    today = _floor_day(now)
    whole = [Bucket(today - timedelta(days=d), today - timedelta(days=d - 1)) for d in range(days - 1, 0, -1)]
    return whole + today_buckets(now)


def today_buckets(now: datetime) -> list[Bucket]:
    today, hour = _floor_day(now), _floor_hour(now)
    return [Bucket(today + timedelta(hours=h), today + timedelta(hours=h + 1)) for h in range(int((hour - today).total_seconds() // 3600) + 1)]


RERUN_HORIZON = timedelta(days=3)
"""GitHub keeps a run re-runnable (and pending) for up to 3 days; after that a bucket is settled."""


def _bucket_ttl(bucket: Bucket, now: datetime) -> int:
    """Seconds to cache a bucket. Jobs still run (and get swept) for the job timeout after they
    start, so those buckets are hot: a minute for the newest hours, a little longer as they age,
    plus a few seconds of jitter (both stagger their expiry, so one request rarely recomputes them
    all). Retries and
    late completions touch the next few days; older buckets barely change."""
    age = now - bucket.end
    if age < _hot_horizon():
        return 60 * (1 + max(0, int(age.total_seconds() // 7200))) + random.randint(0, 15)
    return 15 * 60 if age < RERUN_HORIZON else 24 * 3600


class TalliesPending(Exception):
    """The buckets a window needs are not all computed and this request's time budget is spent:
    the page shows a loading state with this progress and asks again (cold caches only)."""

    def __init__(self, ready: int, total: int):
        super().__init__(f"{ready} of {total} time buckets ready")
        self.ready, self.total = ready, total


COMPUTE_BUDGET_SECONDS = 1.5
"""How long one request may spend filling the cache before it answers with a loading state. A
cold 30-day window over a million jobs takes ~10 s on SQLite; this keeps every answer quick."""


def bucket_tallies(buckets: list[Bucket], now: datetime | None = None) -> list[dict]:
    """One {(project_id, kind): Tally} per bucket, from the cache where it can be; missing ones
    are computed newest first (the hot hours are cheap) until the time budget runs out."""
    now = now or timezone.now()
    found = soft_get_many([b.cache_key for b in buckets])
    missing = sorted((b for b in buckets if b.cache_key not in found), key=lambda b: b.start, reverse=True)
    deadline = time.monotonic() + COMPUTE_BUDGET_SECONDS
    for done, bucket in enumerate(missing):
        if done and time.monotonic() > deadline:
            raise TalliesPending(len(buckets) - len(missing) + done, len(buckets))
        found[bucket.cache_key] = bucket_compute(bucket)
        soft_set(bucket.cache_key, found[bucket.cache_key], _bucket_ttl(bucket, now))
    return [found[b.cache_key] for b in buckets]


SETTLED_MERGE_SECONDS = 300
"""The merge of a window's settled buckets (~50 of them, ~60 ms to merge) is shared this long; a
request then merges it with the few hot hours only."""


def _hot_horizon() -> timedelta:
    return timedelta(hours=max(settings.CRCR_JOB_TIMEOUT_HOURS, settings.CRCR_NEVER_STARTED_HOURS) + 1)


def window_tallies(days: int, now: datetime | None = None) -> dict:
    now = now or timezone.now()
    buckets = window_buckets(days, now)
    settled = [b for b in buckets if now - b.end >= _hot_horizon()]
    hot = buckets[len(settled):]
    parts = bucket_tallies(hot, now)
    if settled:
        parts.append(_settled_merge(days, settled, now))
    return tallies_merge(parts)


def _settled_merge(days: int, settled: list[Bucket], now: datetime) -> dict:
    key = f"hud:settled:v1:{days}:{settled[0].start:%Y%m%d%H}:{settled[-1].start:%Y%m%d%H}"
    merged = soft_get(key)
    if merged is None:
        merged = tallies_merge(bucket_tallies(settled, now))
        soft_set(key, merged, SETTLED_MERGE_SECONDS)
    return merged


# --- one bucket, one statement ------------------------------------------------------------------------


@memoize
def _bucket_sql() -> str:
    """Two parts, one result shape. v: jobs dated in the bucket, grouped by (latest state, first
    state, failed before); every attempt of those jobs is reached through the (head_sha, project)
    index. c, q, x, e: the bucket's own attempts by how they ended, and histogram bins."""
    ended = "CASE ended_by WHEN '' THEN 0 WHEN 'timed_out' THEN 1 WHEN 'never_started' THEN 2 WHEN 'superseded' THEN 3 ELSE 4 END"
    return f"""
WITH pairs AS (
    SELECT DISTINCT project_id, head_sha FROM relay_jobrun WHERE created_at >= %s AND created_at < %s
), attempts AS (
    SELECT j.id, j.project_id, j.head_sha, j.event_type, j.workflow_name, j.job_name, j.status, j.conclusion,
           j.ended_by, j.created_at, j.completed_at, {_ORDER_SQL} AS ordered
    FROM pairs p JOIN relay_jobrun j ON j.head_sha = p.head_sha AND j.project_id = p.project_id
), keyed AS (
    SELECT j.project_id, {KIND_SQL} AS kind,
           MAX(j.ordered * {_STATE_SLOTS} + {state_case_sql("j")}) %% {_STATE_SLOTS} AS latest,
           MIN(j.ordered * {_STATE_SLOTS} + {state_case_sql("j")}) %% {_STATE_SLOTS} AS earliest,
           MAX(CASE WHEN {state_case_sql("j")} IN ({FAILING_NUMS}) THEN 1 ELSE 0 END) AS failed,
           MAX(CASE WHEN j.status = 'completed' THEN j.completed_at END) AS done_at
    FROM attempts j
    GROUP BY j.project_id, j.head_sha, {KIND_SQL}, j.workflow_name, j.job_name
    HAVING MIN(j.created_at) >= %s AND MIN(j.created_at) < %s
), here AS (
    SELECT j.project_id, {KIND_SQL} AS kind, {ended} AS ended, CASE WHEN j.status = 'completed' THEN 1 ELSE 0 END AS completed,
           CASE WHEN j.in_progress_at IS NULL THEN 0 ELSE 1 END AS reported, j.queue_seconds AS q, j.execution_seconds AS x
    FROM relay_jobrun j WHERE j.created_at >= %s AND j.created_at < %s
)
SELECT 'v', project_id, kind, latest, earliest, failed, COUNT(*), 0.0, MAX(done_at) FROM keyed GROUP BY project_id, kind, latest, earliest, failed
UNION ALL
SELECT 'c', project_id, kind, ended, completed, 0, COUNT(*), SUM(reported) * 1.0, NULL FROM here GROUP BY project_id, kind, ended, completed
UNION ALL
SELECT 'q', project_id, kind, {bin_case_sql("q")}, 0, 0, COUNT(*), SUM(q), NULL FROM here WHERE q IS NOT NULL
GROUP BY project_id, kind, {bin_case_sql("q")}
UNION ALL
SELECT 'x', project_id, kind, {bin_case_sql("x")}, 0, 0, COUNT(*), SUM(x), NULL FROM here WHERE x IS NOT NULL
GROUP BY project_id, kind, {bin_case_sql("x")}
UNION ALL
SELECT 'e', project_id, kind, {bin_case_sql("q + x")}, 0, 0, COUNT(*), SUM(q + x), NULL FROM here WHERE q IS NOT NULL AND x IS NOT NULL
GROUP BY project_id, kind, {bin_case_sql("q + x")}
"""


_SWEPT = {1: "timed_out", 2: "never_started", 3: "superseded"}


def bucket_compute(bucket: Bucket) -> dict:
    """One statement per hour, merged: hour-sized statements keep both databases on the
    (head_sha, project) index; at a day's size PostgreSQL misjudges the pairs and scans the table.
    Hours in which nothing was created are skipped through the created_at index."""
    if not _created_within(bucket):
        return {}
    hours = int((bucket.end - bucket.start).total_seconds() // 3600)
    if hours <= 1:
        return _hour_compute(bucket)
    pieces = (Bucket(bucket.start + timedelta(hours=h), bucket.start + timedelta(hours=h + 1)) for h in range(hours))
    return tallies_merge(_hour_compute(piece) for piece in pieces if _created_within(piece))


def _created_within(bucket: Bucket) -> bool:
    return JobRun.objects.filter(created_at__gte=bucket.start, created_at__lt=bucket.end).exists()


def _hour_compute(bucket: Bucket) -> dict:
    bounds = [connection.ops.adapt_datetimefield_value(t) for t in (bucket.start, bucket.end)]
    with connection.cursor() as cursor:
        cursor.execute(_bucket_sql(), bounds * 3)
        rows = cursor.fetchall()
    tallies: dict = {}
    for section, project_id, kind, a, b, c, n, total, at in rows:
        _row_apply(tallies.setdefault((project_id, kind), Tally()), section, a, b, c, n, total, at)
    return tallies


def _row_apply(tally: Tally, section: str, a: int, b: int, c: int, n: int, total: float, at) -> None:
    if section == "v":
        _verdicts_add(tally, NUM_STATE[a], NUM_STATE[b], bool(c), n, at)
    elif section == "c":
        _counters_add(tally, a, bool(b), n, int(total))
    else:
        {"q": tally.queue, "x": tally.execution, "e": tally.e2e}[section].add(a, n, total)


def _verdicts_add(tally: Tally, latest: State, earliest: State, failed_before: bool, n: int, at) -> None:
    if latest == State.SUCCESS and failed_before:
        latest = State.FLAKY
    tally.verdicts[latest] += n
    counts = STATES[latest].counts
    if counts not in (Counts.PENDING, Counts.NONE) and STATES[earliest].counts == Counts.PASS:
        tally.first_passed += n
    if counts not in (Counts.PENDING, Counts.NONE):
        tally.last_result_at = _latest(tally.last_result_at, as_datetime(at))


def _counters_add(tally: Tally, ended: int, completed: bool, n: int, in_progress: int) -> None:
    tally.attempts += n
    tally.in_progress_callbacks += in_progress
    if ended == 0 and completed:
        tally.completed_callbacks += n
    if ended in _SWEPT:
        tally.swept[_SWEPT[ended]] += n


def as_datetime(value) -> datetime | None:
    """Raw SQL gives SQLite's text timestamps as str and PostgreSQL's as datetime."""
    if value is None or isinstance(value, datetime):
        return value
    parsed = parse_datetime(str(value))
    return parsed if parsed is None or parsed.tzinfo else parsed.replace(tzinfo=dt_timezone.utc)


# --- formatting (precomputed here: the template tags module belongs to the grid pages) -------------


def fmt_duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def fmt_percent(rate: float | None) -> str:
    return "–" if rate is None else f"{rate * 100:.1f} %"


def fmt_ago(moment: datetime | None, now: datetime) -> str:
    if moment is None:
        return "never"
    seconds = max(0.0, (now - moment).total_seconds())
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min ago"
    return f"{seconds / 3600:.0f} h ago" if seconds < 2 * 86400 else f"{seconds / 86400:.0f} d ago"


# --- the summary page ---------------------------------------------------------------------------------

LEVEL_SECTIONS = [
    (Level.L4, "L4 backends · merge-gating check runs on every PR"),
    (Level.L3, "L3 backends · check runs on PRs labelled ciflow/crcr/<device>"),
    (Level.L2, "L2 backends · results on the HUD only"),
    (Level.L1, "L1 integrations · webhook dispatch only, no results"),
]
PASS_RATE_TARGET = PASS_RATE_MIN
"""One threshold everywhere a pass rate is coloured: the L3 criterion (rfcs#102, pass rate > 90 %)."""


@dataclass
class BackendRow:
    project: Project
    tally: Tally
    activity: str
    activity_text: str
    last_result_at: datetime | None
    last_result_text: str

    @property
    def rates(self) -> Rates:
        return self.tally.rates

    @property
    def pass_rate_ok(self) -> bool | None:
        rate = self.rates.pass_rate
        return None if rate is None else rate > PASS_RATE_TARGET

    @property
    def pass_rate_text(self) -> str:
        return fmt_percent(self.rates.pass_rate)

    @property
    def first_attempt_text(self) -> str:
        return fmt_percent(self.rates.first_attempt_pass_rate)

    @property
    def timings(self) -> dict:
        t = self.tally
        return {
            "queue_avg": fmt_duration(t.queue.mean), "queue_p90": fmt_duration(t.queue.quantile(0.9)),
            "exec_avg": fmt_duration(t.execution.mean), "exec_p90": fmt_duration(t.execution.quantile(0.9)),
        }


@dataclass
class L1Chip:
    project: Project
    dispatched: int
    not_installed: int
    failed: int


@dataclass
class LevelSection:
    level: str
    title: str
    rows: list = field(default_factory=list)
    chips: list = field(default_factory=list)


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


@dataclass
class Summary:
    window: Window
    tab: str
    now: datetime
    sections: list
    cards: list
    registered: Counter
    probe: Project | None

    @property
    def has_backends(self) -> bool:
        return any(s.rows or s.chips for s in self.sections)

    @property
    def registered_total(self) -> int:
        return sum(self.registered.values())

    @property
    def registered_text(self) -> str:
        return " · ".join(f"{self.registered[level]} {level}" for level, _ in LEVEL_SECTIONS if self.registered[level]) or "none"


def summary_build(window_key: str, tab: str, now: datetime | None = None) -> Summary:
    now = now or timezone.now()
    window = WINDOWS[window_key]
    tallies = window_tallies(window.days, now)
    projects = list(Project.objects.filter(active=True).order_by("position", "full_name"))
    probe = next((p for p in projects if p.is_health_probe), None)
    products = [p for p in projects if not (p.is_health_probe or p.is_reference)]  # the reference is a source, not ranked
    since = window_buckets(window.days, now)[0].start
    sections = _sections_build([p for p in products if in_tab(p, tab)], tallies, window, tab, since, now)
    cards = health_cards(tallies, probe, window, tab, since, now)
    return Summary(window, tab, now, sections, cards, Counter(p.level for p in products), probe)


def in_tab(project: Project, tab: str) -> bool:
    """A repo's allowlist `events` decide which tab lists it: a nightly-only repo is no empty row
    among the pull requests, and a PR-only one none among the nightlies (test-infra #8856)."""
    if tab == "periodic":
        return True
    return project.takes_part_in("pull_request" if tab == "pr" else "nightly")


def _sections_build(products, tallies, window, tab, since, now) -> list[LevelSection]:
    dispatches = _dispatch_counts([p.pk for p in products if p.level == Level.L1], since)
    sections = []
    for level, title in LEVEL_SECTIONS:
        section = LevelSection(level, title)
        for project in (p for p in products if p.level == level):
            if level == Level.L1:
                counts = dispatches.get(project.pk, Counter())
                section.chips.append(L1Chip(project, counts["sent"], counts["not_installed"], counts["failed"]))
            else:
                section.rows.append(backend_row(project, tallies.get((project.pk, tab)) or Tally(), stale_after(window, tab), now))
        section.rows.sort(key=_worst_first)
        if section.rows or section.chips:
            sections.append(section)
    return sections


def _worst_first(row: BackendRow):
    rate = row.rates.pass_rate
    return (rate is None, rate if rate is not None else 0.0, row.project.full_name.lower())


def backend_row(project: Project, tally: Tally, stale: timedelta, now: datetime) -> BackendRow:
    last = tally.last_result_at
    if last is None:
        activity, text = "no_data", "No data: no result in this window"
    elif now - last > stale:
        activity, text = "stale", f"Stale: no result for {fmt_duration((now - last).total_seconds())} (threshold {fmt_duration(stale.total_seconds())})"
    else:
        activity, text = "active", f"Active: last result {fmt_ago(last, now)}"
    return BackendRow(project, tally, activity, text, last, fmt_ago(last, now) if last else "none in window")


def _dispatch_counts(project_ids: list, since: datetime) -> dict:
    """{project_id: Counter(state)} for L1 backends (through the project index, not a scan)."""
    rows = (Dispatch.objects.filter(project_id__in=project_ids, created_at__gte=since).order_by()
            .values("project_id", "state").annotate(n=Count("id")))
    counts: dict = {}
    for row in rows:
        counts.setdefault(row["project_id"], Counter())[row["state"]] += row["n"]
    return counts


# --- relay health ------------------------------------------------------------------------------------

DELIVERIES_STALE_AFTER = timedelta(hours=1)
"""Upstream opens and pushes PRs around the clock; an hour without a single webhook is an outage."""
CALLBACKS_STALE_AFTER = timedelta(hours=2)
DISPATCH_SUCCESS_TARGET = 0.95
PROBE_SHAS = 5
PROBE_LOOKBACK = timedelta(days=14)
OVERDUE_GRACE = timedelta(minutes=15)
"""A job in progress longer than the timeout plus this has been missed by the sweeper (#8800)."""


def health_cards(tallies: dict, probe: Project | None, window: Window, tab: str, since: datetime, now: datetime) -> list[HealthCard]:
    return [
        probe_card(probe, tab, stale_after(window, tab), now),
        deliveries_card(since, window, now),
        dispatch_card(since, window, now),
        callbacks_card(tallies, window, now),
        sweeper_card(tallies, now),
    ]


def _freshness(last: datetime | None, stale: timedelta, now: datetime) -> str:
    limit = fmt_duration(stale.total_seconds())
    return f"never seen · stale after {limit}" if last is None else f"last {fmt_ago(last, now)} · stale after {limit}"


def _silence_state(last: datetime | None, stale: timedelta, now: datetime, ok: bool = True) -> str:
    if last is None:
        return "no_data"
    return "healthy" if ok and now - last <= stale else "degraded"


def deliveries_card(since: datetime, window: Window, now: datetime) -> HealthCard:
    received = Delivery.objects.filter(received_at__gte=since).count()
    last = Delivery.objects.order_by("-received_at").values_list("received_at", flat=True).first()
    state = _silence_state(last, DELIVERIES_STALE_AFTER, now)
    return HealthCard("deliveries", "Webhook deliveries", state, f"{received:,} received", f"{window.label.lower()}",
                      _freshness(last, DELIVERIES_STALE_AFTER, now), "/relay/deliveries")


def dispatch_card(since: datetime, window: Window, now: datetime) -> HealthCard:
    rows = Dispatch.objects.filter(created_at__gte=since).order_by().values("state").annotate(n=Count("id"))
    states = Counter({row["state"]: row["n"] for row in rows})
    tried = states["sent"] + states["failed"]
    rate = states["sent"] / tried if tried else None
    last = _last_sent_at()
    state = _silence_state(last, DELIVERIES_STALE_AFTER, now, ok=rate is None or rate >= DISPATCH_SUCCESS_TARGET)
    if not tried:
        state = "no_data" if last is None else "degraded"
    detail = f"{states['sent']:,} sent · {states['failed']:,} failed · {states['pending'] + states['retrying']:,} open · {states['not_installed']:,} not installed"
    return HealthCard("dispatch", "Dispatch success", state, fmt_percent(rate), detail,
                      _freshness(last, DELIVERIES_STALE_AFTER, now) + f" · target ≥ {DISPATCH_SUCCESS_TARGET:.0%}", "/relay/deliveries?status=failed")


def _last_sent_at() -> datetime | None:
    """From the newest dispatches by primary key (no scan): they are sent seconds after creation."""
    recent = Dispatch.objects.order_by("-id").values_list("state", "sent_at")[:200]
    return next((sent_at for state, sent_at in recent if state == Dispatch.State.SENT), None)


def callbacks_card(tallies: dict, window: Window, now: datetime) -> HealthCard:
    accepted = sum(t.callbacks for t in tallies.values())
    last = JobRun.objects.filter(ended_by="").order_by("-created_at").values_list("updated_at", flat=True).first()
    state = _silence_state(last, CALLBACKS_STALE_AFTER, now)
    return HealthCard("callbacks", "Callbacks accepted", state, f"{accepted:,}", f"in_progress + completed, {window.label.lower()}",
                      _freshness(last, CALLBACKS_STALE_AFTER, now))


def sweeper_card(tallies: dict, now: datetime) -> HealthCard:
    """Overdue: still running past the job's expected duration (hud.overdue), before the sweeper
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
    return HealthCard("sweeper", "Worker and sweeper", state, headline, detail, "worker heartbeat " + _freshness(beat, HEARTBEAT_STALE_AFTER, now))


def overdue_jobs(project: Project | None = None):
    cutoff = timezone.now() - timedelta(hours=settings.CRCR_JOB_TIMEOUT_HOURS) - OVERDUE_GRACE
    jobs = JobRun.objects.filter(status=JobRun.Status.IN_PROGRESS, in_progress_at__lt=cutoff)
    return jobs.filter(project=project) if project else jobs


# --- the health probe ----------------------------------------------------------------------------------


@dataclass
class ProbeHead:
    sha: str
    state: str
    """pass | fail | running, by hud.status.probe_state over the head's jobs."""
    last_at: datetime


def probe_heads(probe: Project, tab: str, now: datetime) -> list[ProbeHead]:
    """The probe's latest few head SHAs of this kind, each judged by the probe rule."""
    kinds = event_filter(tab)
    recent = (JobRun.objects.filter(kinds, project=probe, created_at__gte=now - PROBE_LOOKBACK)
              .values("head_sha").annotate(last=Max("created_at")).order_by("-last")[:PROBE_SHAS])
    heads = {row["head_sha"]: row["last"] for row in recent}
    jobs = JobRun.objects.filter(kinds, project=probe, head_sha__in=list(heads)).only(*_VERDICT_FIELDS)
    by_sha: dict = {}
    for job in jobs:
        by_sha.setdefault(job.head_sha, []).append(job)
    return [ProbeHead(sha, _probe_head_state(by_sha.get(sha, [])), last) for sha, last in heads.items()]


_VERDICT_FIELDS = ("status", "conclusion", "ended_by", "run_id", "run_attempt", "workflow_name", "job_name", "created_at", "head_sha")


def _probe_head_state(jobs: list) -> str:
    counts = {STATES[v.state].counts for v in job_verdicts(jobs, probe=True)}
    if counts & {Counts.FAIL, Counts.INFRA}:
        return "fail"
    return "running" if Counts.PENDING in counts else "pass"


def event_filter(tab: str) -> Q:
    return Q(event_type=tab) if tab in ("nightly", "periodic") else ~Q(event_type__in=("nightly", "periodic"))


def probe_card(probe: Project | None, tab: str, stale: timedelta, now: datetime) -> HealthCard:
    title = "Relay health probe" + ("" if tab == "pr" else f" · {TABS[tab].lower()}")
    if probe is None:
        return HealthCard("probe", title, "no_data", "No probe", "no project is marked as the health probe", "")
    href = f"/crcr/{probe.full_name}" + ("" if tab == "pr" else f"?event={tab}")
    heads = probe_heads(probe, tab, now)
    decided = [h for h in heads if h.state != "running"]
    last = heads[0].last_at if heads else None
    overdue = overdue_jobs(probe).count()
    ok = bool(decided) and all(h.state == "pass" for h in decided) and not overdue
    state = _silence_state(last, stale, now, ok=ok)
    detail = f"{sum(h.state == 'pass' for h in decided)}/{len(decided)} recent heads passed · {probe.full_name}"
    if overdue:
        detail += f" · {overdue} job(s) stuck in progress"
    headline = {"healthy": "All passing", "degraded": "Failing or silent", "no_data": "No results"}[state]
    return HealthCard("probe", title, state, headline, detail, _freshness(last, stale, now), href)
