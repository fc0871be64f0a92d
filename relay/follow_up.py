"""What follows when the relay records something, named where it is recorded: intake calls
`delivery_recorded`, dispatch `dispatch_sent`, callbacks, the sweeper and the reference import
`job_recorded`, the test store `tests_stepped`. Each enqueues the worker tasks that react, after the writer's commit (inline if the
broker cannot take them), so "find callers" leads from every reaction back to its writers."""

from dataclasses import dataclass

from relay.policy.verdicts import FAILING, conclusion_state

from .bisect.tasks import bisection_job_react, bisection_start
from .checks.reactions import upstream_wants_job
from .checks.tasks import delivery_react, dispatch_react, job_react, react_on_commit
from .models import BISECT_EVENT
from .notify.tasks import issue_occurrences_record


@dataclass(frozen=True)
class RecordedJob:
    """What a writer knows of the job row it just wrote: enough to leave out the reactions that
    would find nothing to do (most callbacks are L1/L2 jobs, or passes)."""

    level: str
    event_type: str
    pr_number: int | None
    status: str
    conclusion: str = ""
    ended_by: str = ""


def delivery_recorded(delivery) -> None:
    """A webhook delivery was stored: the PR's gate, labels and re-run requests (relay.checks)."""
    react_on_commit(
        delivery_react, delivery_pk=delivery.pk, event=delivery.event, action=delivery.action, outcome=delivery.outcome
    )


def dispatch_sent(dispatch_id: int) -> None:
    """A dispatch reached GitHub: the backend's queued check run and the gate (relay.checks)."""
    react_on_commit(dispatch_react, dispatch_id=dispatch_id)


def job_recorded(job_run_id: int, recorded: RecordedJob | None = None) -> None:
    """A job run changed: its check runs, gate and oncall comment (relay.checks) when it shows on
    an upstream PR, and its known-issue occurrences with their notifications (relay.triage,
    relay.notify) when it failed; a bisection probe's job moves its bisection (relay.bisect)
    and nothing else. A writer that does not say what it wrote gets the first two (the tasks
    re-check); a probe's job it ended (the sweeper's timeouts) moves its bisection at the next
    bisection sweep, a minute at most."""
    if recorded is not None and recorded.event_type == BISECT_EVENT:
        react_on_commit(bisection_job_react, job_run_id=job_run_id)
        return
    if recorded is None or upstream_wants_job(recorded.level, recorded.event_type, recorded.pr_number):
        react_on_commit(job_react, job_run_id=job_run_id)
    if recorded is None or conclusion_state(recorded) in FAILING:
        react_on_commit(issue_occurrences_record, job_run_id=job_run_id)


def tests_stepped(project, sha: str) -> None:
    """The test store stepped a backend's tests on a commit: a backend that opted in may start
    bisecting a new failure there (relay.bisect.start)."""
    if project.bisect_enabled:
        react_on_commit(bisection_start, project_id=project.pk, sha=sha)
