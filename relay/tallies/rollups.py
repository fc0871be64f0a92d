"""Persisted hourly and daily tallies: a cold summary page reads rows instead of scanning jobs.

Each hour's tallies are computed by the very statement relay.tallies.buckets runs on demand
(`_hour_compute`), stored per (hour, backend, kind of run) as TallyRollup rows, and merged into
day rows; a page merges a window's day and hour rows (cached per refresh generation) with the
current hour, which it computes itself. So the numbers are the on-demand ones, by construction.

Kept fresh by a periodic refresh (beat, every minute), never by the callbacks: a callback adds no
write. What can change an hour's tallies, and how the refresh notices it:

* A job's row belongs to the hour it was created in, and a job (key) is judged in the hour of its
  first attempt, with every attempt of its (head SHA, backend) pair. So a change to any row of a
  pair changes exactly the hours in which that pair has rows: the refresh collects changed pairs
  and recomputes their hours.
* New rows and rows a callback updated (a completion, a real result replacing the sweeper's
  verdict) carry `updated_at`: rows with a higher id than the last refresh saw (a backfill with
  old dates) or updated since it started, less a margin for transactions that committed late.
  Callbacks can reach a job only while its dispatch's callback token is valid (7 days), so the
  updated_at scan only covers rows created since then (the created_at index).
* The sweeper ends running jobs with a plain UPDATE (no updated_at), and an old job may complete
  late: hours whose pairs still had a running job at the last refresh ("open hours", found
  through the running-jobs index) are recomputed at every refresh until they close.
* A refresh that runs out of time (a page filling a cold store) keeps the hours it did not reach
  as pending, so nothing is lost between refreshes.

Every hour recomputed here also gets its excused counts recounted (relay.tallies.excused, which says
what else can change them): a reference row that changed counts as a change to every backend's
rows on its commit, and a change of known issues or registry recomputes the longest range.
"""

import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.db.models import Max, Min, Q
from django.utils import timezone

from relay.models import JobRun, Project, RollupState, TallyRollup
from relay.models.deliveries import CALLBACK_TOKEN_MAX_AGE_SECONDS
from relay.ops.cache import soft_get, soft_set
from relay.policy.verdicts import State
from relay.tallies import buckets as on_demand
from relay.tallies.buckets import (
    Bucket,
    TalliesPending,
    _created_within,
    _floor_day,
    _floor_hour,
    _hour_compute,
    as_datetime,
    buckets_computed,
    window_buckets,
)
from relay.tallies.excused import HORIZON as EXCUSED_HORIZON
from relay.tallies.excused import excused_facts, excused_hours_store
from relay.tallies.histograms import Histogram
from relay.tallies.tally import Tally, tallies_merge

HOUR, DAY = timedelta(hours=1), timedelta(days=1)
LATE_COMMIT_MARGIN = timedelta(minutes=5)
"""A row is stamped before its transaction commits; a refresh looks this far behind its last start."""
CHANGE_HORIZON = timedelta(seconds=CALLBACK_TOKEN_MAX_AGE_SECONDS) + DAY
"""Rows created longer ago than this can no longer be updated by a callback (their token expired)."""
STALE_AFTER = timedelta(seconds=150)
"""Beat refreshes every minute; a page refreshes itself only when that has not happened for this long."""
CLAIM = timedelta(minutes=10)


# --- a tally as JSON ------------------------------------------------------------------------------------


def tally_dump(tally: Tally) -> dict:
    return {
        "v": {state.value: n for state, n in tally.verdicts.items() if n},
        "fp": tally.first_passed,
        "a": tally.attempts,
        "ip": tally.in_progress_callbacks,
        "cc": tally.completed_callbacks,
        "s": dict(tally.swept),
        "h": [[h.counts, h.total] for h in (tally.queue, tally.execution, tally.e2e)],
        "at": tally.last_result_at.isoformat() if tally.last_result_at else None,
    }


def tally_load(data: dict) -> Tally:
    tally = Tally(
        first_passed=data["fp"],
        attempts=data["a"],
        in_progress_callbacks=data["ip"],
        completed_callbacks=data["cc"],
        last_result_at=as_datetime(data["at"]),
    )
    tally.verdicts.update({State(state): n for state, n in data["v"].items()})
    tally.swept.update(data["s"])
    tally.queue, tally.execution, tally.e2e = (Histogram(list(c), t) for c, t in data["h"])
    return tally


# --- the refresh --------------------------------------------------------------------------------------


@dataclass
class RefreshReport:
    recomputed: int
    pending: int
    seconds: float


def rollups_refresh(budget: float | None = None) -> RefreshReport | None:
    """Recompute the hours changed since the last refresh, newest first, within `budget` seconds
    (None: all of them). None when another refresh holds the claim."""
    started, clock = timezone.now(), time.monotonic()
    if not _claim(started):
        return None
    try:
        state = RollupState.objects.get(pk=1)
        top = JobRun.objects.aggregate(top=Max("id"))["top"] or 0
        facts = excused_facts()
        todo = _hours_changed(state, started) | _stamps(state.open_hours + state.pending_hours)
        if state.refreshed_at is not None and facts != state.excused_facts:
            todo |= _every_hour(since=started - EXCUSED_HORIZON)
        todo = sorted(todo, reverse=True)
        open_now = _pairs_hours(_running_pairs())
        done = []
        for hour in todo:
            if budget is not None and done and time.monotonic() - clock > budget:
                break
            _hour_store(hour)
            done.append(hour)
        _days_store({_floor_day(hour) for hour in done})
        excused_hours_store(done)
        _state_save(state, top, started, open_now, todo[len(done) :], bool(done), facts)
    finally:
        RollupState.objects.filter(pk=1).update(claimed_until=None)
    return RefreshReport(len(done), len(todo) - len(done), time.monotonic() - clock)


def _claim(now: datetime) -> bool:
    """One refresh at a time, by a conditional UPDATE (the state row is made on first use)."""
    RollupState.objects.get_or_create(pk=1)
    free = Q(claimed_until__isnull=True) | Q(claimed_until__lt=now)
    return RollupState.objects.filter(free, pk=1).update(claimed_until=now + CLAIM) == 1


def _state_save(state: RollupState, top: int, started: datetime, open_now: set, pending: list, stored: bool, facts):
    RollupState.objects.filter(pk=1).update(
        excused_facts=facts,
        last_id=max(top, state.last_id),
        refreshed_at=started,
        finished_at=state.finished_at if pending else timezone.now(),
        generation=random.randrange(1, 2**62) if stored else state.generation,
        open_hours=[h.isoformat() for h in sorted(open_now)],
        pending_hours=[h.isoformat() for h in pending],
    )


def _stamps(values: list) -> set:
    return {as_datetime(value) for value in values}


def _hours_changed(state: RollupState, now: datetime) -> set:
    if state.refreshed_at is None:
        return _every_hour()
    since = state.refreshed_at - LATE_COMMIT_MARGIN
    rows = JobRun.objects.filter(
        Q(id__gt=state.last_id) | Q(created_at__gte=now - CHANGE_HORIZON, updated_at__gte=since)
    )
    return _pairs_hours(_with_reference_commits(set(rows.values_list("project_id", "head_sha").distinct())))


def _with_reference_commits(pairs: set) -> set:
    """A reference row that changed can change the excuse of every backend's job on its commit."""
    references = set(Project.objects.references().values_list("pk", flat=True))
    shas = sorted({sha for project_id, sha in pairs if project_id in references})
    for i in range(0, len(shas), 500):
        rows = JobRun.objects.filter(head_sha__in=shas[i : i + 500]).values_list("project_id", "head_sha")
        pairs = pairs | set(rows.distinct())
    return pairs


def _every_hour(since: datetime | None = None) -> set:
    """The first refresh: every hour from the oldest job (or `since`) to the newest (empty ones are cheap)."""
    span = JobRun.objects.aggregate(first=Min("created_at"), last=Max("created_at"))
    if span["first"] is None:
        return set()
    first = max(span["first"], since) if since else span["first"]
    hour, last, hours = _floor_hour(first), span["last"], set()
    while hour <= last:
        hours.add(hour)
        hour += HOUR
    return hours


def _running_pairs() -> set:
    return set(JobRun.objects.filter(status=JobRun.Status.IN_PROGRESS).values_list("project_id", "head_sha").distinct())


def _pairs_hours(pairs: set) -> set:
    """The hours in which these (backend, head SHA) pairs have rows (the (head_sha, project) index)."""
    shas, hours = sorted({sha for _, sha in pairs}), set()
    for i in range(0, len(shas), 500):
        rows = JobRun.objects.filter(head_sha__in=shas[i : i + 500]).values_list("project_id", "head_sha", "created_at")
        hours.update(_floor_hour(at) for project_id, sha, at in rows if (project_id, sha) in pairs)
    return hours


def _hour_store(hour: datetime) -> None:
    bucket = Bucket(hour, hour + HOUR)
    tallies = _hour_compute(bucket) if _created_within(bucket) else {}
    _rows_replace("h", hour, tallies)


def _days_store(days: set) -> None:
    for day in days:
        hours = TallyRollup.objects.filter(size="h", start__gte=day, start__lt=day + DAY)
        rows = hours.values_list("project_id", "kind", "tally")
        _rows_replace("d", day, tallies_merge({(p, k): tally_load(data)} for p, k, data in rows))


def _rows_replace(size: str, start: datetime, tallies: dict) -> None:
    rows = [
        TallyRollup(size=size, start=start, project_id=project_id, kind=kind, tally=tally_dump(tally))
        for (project_id, kind), tally in tallies.items()
    ]
    with transaction.atomic():
        TallyRollup.objects.filter(size=size, start=start).delete()
        TallyRollup.objects.bulk_create(rows)


# --- reading ------------------------------------------------------------------------------------------

MERGE_CACHE_SECONDS = 300
"""A window's merge of stored rows is shared until the next refresh changes them (or this long)."""


def window_tallies(days: int, now: datetime | None = None) -> dict:
    """{(project_id, kind): Tally} over a summary window: stored rows, merged once per refresh
    generation, plus the current hour computed here (cached a minute)."""
    now = now or timezone.now()
    buckets = window_buckets(days, now)
    stored, live = _split(buckets, now)
    state = rollups_ready()
    key = f"hud:rollup:v1:{state.generation}:{days}:{buckets[0].start:%Y%m%d%H}:{_floor_hour(now):%Y%m%d%H}"
    merged = soft_get(key)
    if merged is None:
        merged = tallies_merge(rollup_tallies(stored))
        soft_set(key, merged, MERGE_CACHE_SECONDS)
    return tallies_merge([merged, *buckets_computed(live, now)])


def bucket_tallies(buckets: list[Bucket], now: datetime | None = None) -> list[dict]:
    """One {(project_id, kind): Tally} per bucket: stored rows, the current hour computed here."""
    now = now or timezone.now()
    stored, live = _split(buckets, now)
    rollups_ready()
    found = dict(zip(stored, rollup_tallies(stored), strict=True))
    found.update(zip(live, buckets_computed(live, now), strict=True))
    return [found[b] for b in buckets]


def _split(buckets: list[Bucket], now: datetime) -> tuple[list, list]:
    current = _floor_hour(now)
    return [b for b in buckets if b.end <= current], [b for b in buckets if b.end > current]


def rollups_ready() -> RollupState:
    """The state of the stored rows, refreshed here (within the page's time budget) when beat has
    not done it lately; TalliesPending while a cold store is still being filled."""
    state = rollups_state()
    if state is None or state.finished_at is None or timezone.now() - state.finished_at > STALE_AFTER:
        report = rollups_refresh(budget=on_demand.COMPUTE_BUDGET_SECONDS)
        state = rollups_state()
        if state.finished_at is None:  # never filled completely: a cold store, still loading
            done = report.recomputed if report else 0
            raise TalliesPending(done, done + max(1, len(state.pending_hours)))
    return state


def rollups_state() -> RollupState | None:
    return RollupState.objects.filter(pk=1).first()


def rollup_tallies(buckets: list[Bucket]) -> list[dict]:
    """One {(project_id, kind): Tally} per bucket, read from the stored rows (one query)."""
    wanted = {(_size(b), b.start.astimezone(UTC)): i for i, b in enumerate(buckets)}
    found: list[dict] = [{} for _ in buckets]
    condition = Q(pk__in=[])
    for size in ("h", "d"):
        starts = [start for s, start in wanted if s == size]
        if starts:
            condition |= Q(size=size, start__in=starts)
    rows = TallyRollup.objects.filter(condition).values_list("size", "start", "project_id", "kind", "tally")
    for size, start, project_id, kind, data in rows:
        found[wanted[(size, start.astimezone(UTC))]][(project_id, kind)] = tally_load(data)
    return found


def _size(bucket: Bucket) -> str:
    return "h" if bucket.end - bucket.start <= HOUR else "d"
