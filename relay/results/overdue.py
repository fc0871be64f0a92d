"""Overdue jobs (test-infra #8800/#8801): a job still in progress past its expected duration, shown
as *overdue* on the grid, the backend page and the relay-health card well before the sweeper ends
it as timed out.

Expected duration of a job = 1.5 × the p90 execution time (relay clock, in_progress → completed) of
its last `SAMPLE_SIZE` runs that finished by callback on the same backend with the same workflow
and job name, over the past `LOOKBACK`, and never under `MINIMUM`. A job with fewer than
`MIN_SAMPLES` such runs (new, renamed, or reporting without in_progress) gets the configured
default, `CRCR_JOB_EXPECTED_MINUTES` (180: the 3 h "overrun" threshold of upstream readiness,
test-infra #8754). Neither is ever past three quarters of the job timeout, so a job always shows
as overdue for a while before the sweeper ends it as timed out.

The p90 says how long nine in ten recent runs took; the 50 % headroom keeps ordinary variation
from reading as trouble. Expectations are cached per job for a few minutes, so a grid page asks
the database only about the few running jobs it shows."""

import hashlib
import math
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from relay.models import JobRun
from relay.ops.cache import soft_get_many, soft_set_many
from relay.policy.verdicts import State

SAMPLE_SIZE = 20
MIN_SAMPLES = 5
HEADROOM = 1.5
MINIMUM = timedelta(minutes=10)
LOOKBACK = timedelta(days=14)
CACHE_SECONDS = 600

JobKey = tuple[int, str, str]
"""(project id, workflow name, job name)."""


def default_expected() -> timedelta:
    return min(timedelta(minutes=settings.CRCR_JOB_EXPECTED_MINUTES), longest_expected())


OVERDUE_BEFORE_TIMEOUT = 0.75
"""The longest expectation, as a share of the job timeout."""


def longest_expected() -> timedelta:
    return timedelta(hours=settings.CRCR_JOB_TIMEOUT_HOURS) * OVERDUE_BEFORE_TIMEOUT


def expected_from(samples: list[float]) -> timedelta:
    """From a job's recent execution times: 1.5 × their p90 (nearest rank), at least 10 minutes,
    at most three quarters of the timeout."""
    if len(samples) < MIN_SAMPLES:
        return default_expected()
    ordered = sorted(samples)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]
    return min(max(timedelta(seconds=p90 * HEADROOM), MINIMUM), longest_expected())


def expected_durations(keys, now: datetime | None = None) -> dict[JobKey, timedelta]:
    keys = set(keys)
    cache_keys = {key: _cache_key(key) for key in keys}
    found = soft_get_many(list(cache_keys.values()))
    known = {key: timedelta(seconds=found[ck]) for key, ck in cache_keys.items() if ck in found}
    missing = keys - set(known)
    if missing:
        computed = {key: expected_from(samples) for key, samples in _samples(missing, now or timezone.now()).items()}
        soft_set_many({cache_keys[key]: value.total_seconds() for key, value in computed.items()}, CACHE_SECONDS)
        known.update(computed)
    return known


def _cache_key(key: JobKey) -> str:
    digest = hashlib.sha1(f"{key[1]}\0{key[2]}".encode()).hexdigest()[:16]
    return f"hud:expected:v1:{key[0]}:{digest}"


def _samples(keys: set[JobKey], now: datetime) -> dict[JobKey, list[float]]:
    """The latest SAMPLE_SIZE callback-finished execution times of each key, in one query."""
    rows = (
        JobRun.objects.filter(
            project_id__in={k[0] for k in keys},
            workflow_name__in={k[1] for k in keys},
            job_name__in={k[2] for k in keys},
            status=JobRun.Status.COMPLETED,
            ended_by="",
            execution_seconds__isnull=False,
            created_at__gte=now - LOOKBACK,
        )
        .annotate(
            recent=Window(
                RowNumber(), partition_by=[F("project_id"), F("workflow_name"), F("job_name")], order_by=F("id").desc()
            )
        )
        .filter(recent__lte=SAMPLE_SIZE)
        .values_list("project_id", "workflow_name", "job_name", "execution_seconds")
    )
    samples: dict[JobKey, list[float]] = {key: [] for key in keys}
    for project_id, workflow, job, seconds in rows:
        if (project_id, workflow, job) in samples:
            samples[(project_id, workflow, job)].append(seconds)
    return samples


def overdue_job_ids(jobs, now: datetime | None = None) -> set[int]:
    """Ids of the running jobs (objects with id, project_id, workflow_name, job_name, status,
    in_progress_at) that have run longer than expected."""
    now = now or timezone.now()
    running = [j for j in jobs if j.status == JobRun.Status.IN_PROGRESS and j.in_progress_at is not None]
    if not running:
        return set()
    expected = expected_durations({(j.project_id, j.workflow_name, j.job_name) for j in running}, now)
    return {j.id for j in running if now - j.in_progress_at > expected[(j.project_id, j.workflow_name, j.job_name)]}


def overdue_among(job_ids, now: datetime | None = None) -> set[int]:
    """The overdue ones among these job ids (one small query for their start times)."""
    ids = list(job_ids)
    if not ids:
        return set()
    jobs = JobRun.objects.filter(id__in=ids, status=JobRun.Status.IN_PROGRESS).only(
        "id", "project_id", "workflow_name", "job_name", "status", "in_progress_at"
    )
    return overdue_job_ids(jobs, now)


def running_jobs_overdue(project=None, now: datetime | None = None) -> list:
    """Every running job past its expected duration (optionally of one backend), oldest first."""
    now = now or timezone.now()
    shortest = min(MINIMUM, default_expected(), longest_expected())  # no job is expected to take less
    candidates = JobRun.objects.filter(status=JobRun.Status.IN_PROGRESS, in_progress_at__lt=now - shortest)
    if project is not None:
        candidates = candidates.filter(project=project)
    candidates = list(
        candidates.only("id", "project_id", "workflow_name", "job_name", "status", "in_progress_at").order_by(
            "in_progress_at"
        )[:2000]
    )
    overdue = overdue_job_ids(candidates, now)
    return [job for job in candidates if job.id in overdue]


def running_job_ids(verdict_lists) -> set[int]:
    return {v.job.id for verdicts in verdict_lists for v in verdicts if v.state == State.RUNNING}
