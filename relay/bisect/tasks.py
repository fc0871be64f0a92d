"""Thin Celery tasks for bisection: ids in, rows re-read, one service called."""

from relay.queues import FOLLOW_UP, relay_task

from ..models import BISECT_EVENT, Bisection, BisectProbe, JobRun
from .search import bisection_advance
from .start import bisection_consider


@relay_task("relay.bisection_consider", FOLLOW_UP, acks_late=True, soft_time_limit=120, time_limit=150)
def bisection_start(project_id: int, sha: str) -> int | None:
    """A backend's tests were stepped on `sha`: the bisection they start, and its first probe."""
    bisection = bisection_consider(project_id, sha)
    if bisection is None or not bisection.running:
        return None
    bisection_advance(bisection.pk)
    return bisection.pk


@relay_task("relay.bisection_job_react", FOLLOW_UP, acks_late=True)
def bisection_job_react(job_run_id: int) -> str | None:
    """A job answering a probe changed: the bisection takes its step if the probe is decided."""
    job = JobRun.objects.filter(pk=job_run_id, event_type=BISECT_EVENT).only("dispatch_id").first()
    probe = BisectProbe.objects.filter(dispatch_id=job.dispatch_id).first() if job and job.dispatch_id else None
    return bisection_advance(probe.bisection_id) if probe is not None else None


@relay_task("relay.bisections_sweep", FOLLOW_UP, acks_late=True, soft_time_limit=240, time_limit=290)
def bisections_sweep() -> int:
    """Every running bisection one step further where it can move: what resumes a bisection after
    a restart, a lost message or a probe the results sweeper timed out."""
    ids = list(Bisection.objects.running().values_list("pk", flat=True)[:500])
    return sum(bisection_advance(pk) is not None for pk in ids)
