"""What the upstream PR integration does when intake, dispatch, callbacks or the sweeper record
something. Each runs on a worker (relay.checks.tasks: dispatch_react, job_react, delivery_react,
enqueued by the writer after its commit), so it only writes rows and enqueues outbox writes;
GitHub is called by the outbox tasks."""

import functools
import logging

from django.db import transaction

from relay.stats.runkinds import Figure, counts_run

from ..models import Delivery, Dispatch, JobRun, Level
from . import labels, reruns
from .checkruns import backend_check_run_refresh, gate_check_run_refresh, job_check_run_refresh
from .oncall import oncall_refresh

logger = logging.getLogger(__name__)
UPSTREAM_LEVELS = (Level.L3, Level.L4)
HEAD_ACTIONS = ("opened", "reopened", "synchronize")


def _logged(fn):
    """The writer has committed and answered for its own work; a failure here must not turn
    that into an error (GitHub would redeliver). It is logged with its traceback instead."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            with transaction.atomic():
                return fn(*args, **kwargs)
        except Exception:  # noqa: BLE001
            logger.exception("upstream PR integration: %s failed for %s", fn.__name__, kwargs)

    return wrapper


@_logged
def dispatch_reacted(dispatch_id: int) -> None:
    """A backend is expected on the PR head: its queued check run, and the gate for L4."""
    dispatch = Dispatch.objects.select_related("project", "delivery").get(pk=dispatch_id)
    project = dispatch.project
    if (
        dispatch.event_type != "pull_request"
        or not dispatch.pr_number
        or dispatch.delivery.is_closing
        or project.level not in UPSTREAM_LEVELS
    ):
        return
    if project.level == Level.L4:
        gate_check_run_refresh(dispatch.pr_number, dispatch.head_sha)
    if labels.check_runs_wanted(project, dispatch.pr_number):
        backend_check_run_refresh(project, dispatch.pr_number, dispatch.head_sha)


@_logged
def job_reacted(job_run_id: int) -> None:
    """A job started, finished, or was ended by the sweeper: its check run, its backend's, the
    gate (L4) and the oncall comment follow."""
    job = JobRun.objects.select_related("project", "dispatch__delivery").filter(pk=job_run_id).first()
    if job is None or not job_shows_on_pr(job):
        return
    project, pr = job.project, job.pr_number
    if project.level == Level.L4:
        gate_check_run_refresh(pr, job.head_sha)
    if not labels.check_runs_wanted(project, pr):
        return
    job_check_run_refresh(job)
    backend_check_run_refresh(project, pr, job.head_sha)
    oncall_refresh(project, pr)


def upstream_wants_job(level: str, event_type: str, pr_number: int | None) -> bool:
    """Only L3/L4 jobs on an upstream PR show on it (check runs, the gate, oncall): a writer asks
    this before it enqueues a reaction that would otherwise find nothing to do. A push has a PR
    only when it is the PR's `ciflow/trunk/<pr>` merge run (relay.intake.deliveries)."""
    return bool(pr_number) and counts_run(Figure.GATE, event_type) and level in UPSTREAM_LEVELS


def job_shows_on_pr(job: JobRun) -> bool:
    """A job of a PR head the gate counts (relay.stats.runkinds), not a closing clean-up, on L3/L4."""
    closing = job.dispatch is not None and job.dispatch.delivery.is_closing
    return upstream_wants_job(job.project.level, job.event_type, job.pr_number) and counts_run(
        Figure.GATE, job.event_type, closing
    )


@_logged
def delivery_reacted(delivery_pk: int, event: str, action: str, outcome: str) -> None:
    """A new PR head gets its gate at once; labels and re-run requests are acted on."""
    if outcome == Delivery.Outcome.IGNORED:
        return
    delivery = Delivery.objects.get(pk=delivery_pk)
    if event == "pull_request" and action in HEAD_ACTIONS and delivery.pr_number and delivery.head_sha:
        gate_check_run_refresh(delivery.pr_number, delivery.head_sha)
    elif event == "pull_request" and action in ("labeled", "unlabeled") and delivery.pr_number:
        labels.label_changed(delivery)
    elif event == "check_run" and action == "rerequested":
        reruns.check_run_rerequested(delivery)
    elif event == "check_suite" and action == "rerequested":
        reruns.check_suite_rerequested(delivery)
