"""The results sweeper: jobs that never finish, dispatches that never start, and work made moot
by a newer PR head all end visibly in the results (not only in logs). Bounded per run."""

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from .. import follow_up
from ..models import NEVER_STARTED_RUN_ID, Conclusion, Dispatch, JobRun, Level, UsedToken
from ..results.heads import pr_heads_newest

logger = logging.getLogger(__name__)


@dataclass
class SweepReport:
    timed_out: int = 0
    never_started: int = 0
    superseded: int = 0
    tokens_pruned: int = 0


def results_sweep(limit: int = 500, now=None) -> SweepReport:
    now = now or timezone.now()
    report = SweepReport()
    report.superseded = jobs_supersede(limit)
    report.timed_out = jobs_time_out(limit, now)
    report.never_started = dispatches_never_started(limit, now)
    report.tokens_pruned = UsedToken.objects.filter(expires_at__lt=now).delete()[0]
    if report.timed_out or report.never_started or report.superseded:
        logger.info("results sweep: %s", report)
    return report


def jobs_supersede(limit: int) -> int:
    open_jobs = list(
        JobRun.objects.filter(status=JobRun.Status.IN_PROGRESS, pr_number__isnull=False).only(
            "pk", "pr_number", "head_sha"
        )[: limit * 4]
    )
    heads = pr_heads_newest(job.pr_number for job in open_jobs)
    stale = [job.pk for job in open_jobs if heads.get(job.pr_number, job.head_sha) != job.head_sha][:limit]
    # Row by row, so that of two sweeps racing (a backlog on two workers) each announces only the
    # jobs it ended itself.
    ended = [pk for pk in stale if _supersede(pk)]
    _announce(ended)
    return len(ended)


def _supersede(pk: int) -> bool:
    return bool(
        JobRun.objects.filter(pk=pk, status=JobRun.Status.IN_PROGRESS).update(
            status=JobRun.Status.COMPLETED,
            conclusion=Conclusion.CANCELLED,
            ended_by=JobRun.EndedBy.SUPERSEDED,
            completed_at=timezone.now(),
        )
    )


def jobs_time_out(limit: int, now) -> int:
    cutoff = now - timedelta(hours=settings.CRCR_JOB_TIMEOUT_HOURS)
    ended = []
    for job in JobRun.objects.filter(status=JobRun.Status.IN_PROGRESS, in_progress_at__lt=cutoff)[:limit]:
        if JobRun.objects.filter(pk=job.pk, status=JobRun.Status.IN_PROGRESS).update(
            status=JobRun.Status.COMPLETED,
            conclusion=Conclusion.TIMED_OUT,
            ended_by=JobRun.EndedBy.TIMED_OUT,
            completed_at=now,
            execution_seconds=round((now - job.in_progress_at).total_seconds(), 3),
        ):
            ended.append(job.pk)
    _announce(ended)
    return len(ended)


def dispatches_never_started(limit: int, now) -> int:
    cutoff = now - timedelta(hours=settings.CRCR_NEVER_STARTED_HOURS)
    answered = JobRun.objects.filter(dispatch=OuterRef("pk"))
    silent = (
        Dispatch.objects.filter(state=Dispatch.State.SENT, sent_at__lt=cutoff)
        .exclude(project__level=Level.L1)
        .filter(~Exists(answered))
        .select_related("project", "delivery")[:limit]
    )
    silent = list(silent)
    heads = pr_heads_newest(d.pr_number for d in silent if d.pr_number)
    with transaction.atomic():
        made = [JobRun.objects.get_or_create(**_never_started_row(dispatch, heads, now)) for dispatch in silent]
        created = [row.pk for row, created in made if created]
        _announce(created)
    return len(created)  # a racing sweep may have made some of them: it counts those


def _announce(job_ids) -> None:
    """Check runs, gate and oncall follow the rows the sweeper ended, after commit."""
    for pk in list(job_ids):
        follow_up.job_recorded(pk)


def _never_started_row(dispatch: Dispatch, heads: dict, now) -> dict:
    moot = dispatch.pr_number is not None and heads.get(dispatch.pr_number, dispatch.head_sha) != dispatch.head_sha
    return {
        "delivery_key": dispatch.delivery.guid,
        "project": dispatch.project,
        "run_id": NEVER_STARTED_RUN_ID,
        "run_attempt": 1,
        "job_name": "",
        "defaults": {
            "dispatch": dispatch,
            "event_type": dispatch.event_type,
            "workflow_name": "(no run started)",
            "status": JobRun.Status.COMPLETED,
            "completed_at": now,
            "start_unknown": True,
            "conclusion": Conclusion.CANCELLED if moot else Conclusion.TIMED_OUT,
            "ended_by": JobRun.EndedBy.SUPERSEDED if moot else JobRun.EndedBy.NEVER_STARTED,
            "head_sha": dispatch.head_sha,
            "pr_number": dispatch.pr_number,
        },
    }
