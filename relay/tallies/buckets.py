"""Time buckets of tallies, computed in SQL and cached: what every summary page aggregates from.

How the numbers are computed, and why this way
----------------------------------------------
Every aggregate follows relay.policy.verdicts: the latest attempt per (head SHA, backend, kind of run, job)
decides, a pass after a failed attempt passed on retry, superseded work counts nowhere. The SQL below is
*generated from* relay.policy.verdicts (each conclusion / ended_by combination is judged by
`conclusion_state` itself), so there is still one policy; the SQL is its translation, and a test
checks both agree on random data.

The summary pages read these tallies from stored hourly rollups (relay.tallies.rollups), which run
the hour statement below from a periodic refresh; only the current hour is computed on a request.

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
* Attempts are ordered as relay.policy.verdicts orders them: runs by their first row's id (rows are
  inserted when first reported, so id order is arrival order), attempts within a run by
  `run_attempt` (a late callback of attempt 1 never overtakes attempt 2). One
  MAX(order * 32 + state) picks the latest attempt's state in the same pass, portably (SQLite
  and PostgreSQL, through a window function).
* Timings count every attempt (a retry queued and ran too). p50/p90 cannot be merged across
  buckets, so each bucket keeps histograms of queue, execution and end-to-end seconds over fixed
  edges; quantiles are interpolated within a bin (about ±12 %). The readiness thresholds (30 min,
  3 h) are bin edges, so those verdicts are exact; averages come from exact sums.
"""

import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache as memoize

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, router
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from relay.models import JobRun
from relay.ops.cache import soft_get_many, soft_set
from relay.policy.verdicts import STATES, Counts, State, first_attempt_passed, retried_state
from relay.stats.runkinds import Figure, counted_sql
from relay.tallies.histograms import bin_case_sql
from relay.tallies.sql import FAILING_NUMS, KIND_SQL, NUM_STATE, ORDER_SQL, STATE_SLOTS, state_case_sql
from relay.tallies.tally import Tally, latest_of, tallies_merge

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
    return moment.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


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
    return [
        Bucket(today + timedelta(hours=h), today + timedelta(hours=h + 1))
        for h in range(int((hour - today).total_seconds() // 3600) + 1)
    ]


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


def buckets_computed(buckets: list[Bucket], now: datetime | None = None) -> list[dict]:
    """One {(project_id, kind): Tally} per bucket, computed on demand and cached for as long as it
    can still change (the summary pages read stored rollups, relay.tallies.rollups; they compute
    only the current hour this way). Missing ones are computed newest first until the time budget
    runs out."""
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


def _hot_horizon() -> timedelta:
    return timedelta(hours=max(settings.CRCR_JOB_TIMEOUT_HOURS, settings.CRCR_NEVER_STARTED_HOURS) + 1)


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
           j.ended_by, j.created_at, j.completed_at, {ORDER_SQL} AS ordered
    FROM pairs p JOIN relay_jobrun j ON j.head_sha = p.head_sha AND j.project_id = p.project_id
    WHERE {counted_sql(Figure.TALLIES, "j")}
), keyed AS (
    SELECT j.project_id, {KIND_SQL} AS kind,
           MAX(j.ordered * {STATE_SLOTS} + {state_case_sql("j")}) %% {STATE_SLOTS} AS latest,
           MIN(j.ordered * {STATE_SLOTS} + {state_case_sql("j")}) %% {STATE_SLOTS} AS earliest,
           MAX(CASE WHEN {state_case_sql("j")} IN ({FAILING_NUMS}) THEN 1 ELSE 0 END) AS failed,
           MAX(CASE WHEN j.status = 'completed' THEN j.completed_at END) AS done_at
    FROM attempts j
    GROUP BY j.project_id, j.head_sha, {KIND_SQL}, j.workflow_name, j.job_name
    HAVING MIN(j.created_at) >= %s AND MIN(j.created_at) < %s
), here AS (
    SELECT j.project_id, {KIND_SQL} AS kind, {ended} AS ended, CASE WHEN j.status = 'completed' THEN 1 ELSE 0 END AS completed,
           CASE WHEN j.in_progress_at IS NULL THEN 0 ELSE 1 END AS reported, j.queue_seconds AS q, j.execution_seconds AS x
    FROM relay_jobrun j WHERE j.created_at >= %s AND j.created_at < %s AND {counted_sql(Figure.TALLIES, "j")}
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
    # Raw SQL skips the database routers: ask them, so a page's tallies read the replica (crcr/dbrouter.py).
    connection = connections[router.db_for_read(JobRun) or DEFAULT_DB_ALIAS]
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
    latest = retried_state(latest, failed_before)
    tally.verdicts[latest] += n
    counts = STATES[latest].counts
    if first_attempt_passed(latest, earliest):
        tally.first_passed += n
    if counts not in (Counts.PENDING, Counts.NONE):
        tally.last_result_at = latest_of(tally.last_result_at, as_datetime(at))


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
    return parsed if parsed is None or parsed.tzinfo else parsed.replace(tzinfo=UTC)
