"""Known-issue occurrences are recorded when a job's result is recorded (after the writer's
commit). A worker does it; if the broker cannot take the task it is done here and now."""

import logging

from celery import shared_task
from django.dispatch import receiver

from .. import signals
from . import issues

logger = logging.getLogger(__name__)


@shared_task(name="relay.issue_occurrences_record", acks_late=True, soft_time_limit=60, time_limit=72)
def issue_occurrences_record(job_run_id: int) -> int:
    from ..notify.events import issues_seen_again

    created = issues.occurrences_record(job_run_id)
    issues_seen_again(created)
    return len(created)


@receiver(signals.job_recorded, dispatch_uid="triage-job-recorded")
def on_job_recorded(sender, job_run_id, **kwargs):
    try:
        issue_occurrences_record.apply_async(args=[job_run_id])
    except Exception as exc:  # noqa: BLE001 - any broker failure: record inline rather than lose it
        logger.warning("could not enqueue occurrence recording for job %s (recording inline): %s", job_run_id, exc)
        try:
            issue_occurrences_record(job_run_id)
        except Exception:  # noqa: BLE001 - the callback has answered; never turn this into its error
            logger.exception("recording known-issue occurrences for job %s failed", job_run_id)
