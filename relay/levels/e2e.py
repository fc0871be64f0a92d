"""The end-to-end p50 of the level criteria, computed as upstream computes it (reference
upstream-changes.md, "Level criteria, in detail"): per **run**, one sample each,

    max queue time over the run's jobs + (last completion − first start over its jobs),

over the backend's completed PR jobs (relay.stats.runkinds: PR heads only; pushes, nightlies and a PR's
closing clean-up left out), each job's latest attempt per (repo, run_id, job_name) — run_id is unique only within a repo, so
runs are the backend's own. Starts and completions are the times the CI reported, else the relay's
clock; a job the relay ended (timed out, never started, superseded) did not complete. The median
of the samples (the mean of the middle two for an even count); no run, no data."""

import statistics
from datetime import datetime

from relay.models import JobRun, Project
from relay.ops.cache import soft_get, soft_set
from relay.policy.verdicts import latest_attempt
from relay.stats.runkinds import Figure, jobs_counted

CACHE_SECONDS = 120
FIELDS = (
    "run_id",
    "run_attempt",
    "job_name",
    "workflow_name",
    "created_at",
    "queue_seconds",
    "reported_started_at",
    "in_progress_at",
    "reported_completed_at",
    "completed_at",
)


def run_samples(jobs) -> list[float]:
    """One end-to-end sample (seconds) per run of these jobs (one backend's), latest attempts only."""
    by_key: dict[tuple[str, str], list] = {}
    for job in jobs:
        by_key.setdefault((job.run_id, job.job_name), []).append(job)
    runs: dict[str, list] = {}
    for attempts in by_key.values():
        latest = latest_attempt(attempts)
        runs.setdefault(latest.run_id, []).append(latest)
    return [s for s in (run_sample(members) for members in runs.values()) if s is not None]


def run_sample(jobs: list) -> float | None:
    starts = [j.reported_started_at or j.in_progress_at for j in jobs]
    ends = [j.reported_completed_at or j.completed_at for j in jobs]
    starts, ends = [s for s in starts if s], [e for e in ends if e]
    if not starts or not ends:
        return None
    queue = max((j.queue_seconds for j in jobs if j.queue_seconds is not None), default=0.0)
    return queue + max(0.0, (max(ends) - min(starts)).total_seconds())


def p50(samples: list[float]) -> float | None:
    return statistics.median(samples) if samples else None


def e2e_p50(project: Project, since: datetime) -> float | None:
    """The backend's end-to-end p50 over runs whose jobs were first seen since `since` (a bucket
    start, so the cache key repeats for its hour)."""
    return e2e_p50s(project, [since])[0]


def e2e_p50s(project: Project, starts: list[datetime]) -> list[float | None]:
    """`e2e_p50` for each window start, the jobs of the widest window read once for all of them
    (the level criteria ask for 14 and 7 days: the second read was a third of the first's rows)."""
    keys = [f"hud:e2e-p50:v1:{project.pk}:{since:%Y%m%d%H}" for since in starts]
    cached = [soft_get(key) for key in keys]
    if all(c is not None for c in cached):
        return [c.get("p50") for c in cached]
    jobs = list(_completed_jobs(project, min(starts)))
    values = []
    for since, key, hit in zip(starts, keys, cached, strict=True):
        if hit is None:
            hit = {"p50": p50(run_samples(j for j in jobs if j.created_at >= since))}
            soft_set(key, hit, CACHE_SECONDS)
        values.append(hit.get("p50"))
    return values


def _completed_jobs(project: Project, since: datetime):
    return (
        jobs_counted(Figure.E2E_P50)
        .filter(
            project=project,
            status=JobRun.Status.COMPLETED,
            ended_by=JobRun.EndedBy.CALLBACK,
            created_at__gte=since,
        )
        .only(*FIELDS)
    )
