"""A bisection's probes: each one a Delivery of our own (event `bisect`) with one Dispatch to the
backend, sent by the dispatch outbox like any other and answered by ordinary callbacks bound by
its callback_token; and what the run that answered says about the tests asked about.

A probe counts against the backend's daily budget when it is made: the budget is checked and
the probe made under the bisection's row lock, and a backend has one bisection running at a time,
so two workers never both spend the last probe."""

import logging
from datetime import UTC, datetime, time, timedelta

from django.db import transaction
from django.utils import timezone

from relay.policy.testids import report_ids

from ..models import (
    BISECT_EVENT,
    PROBE_KEY_PREFIX,
    Bisection,
    BisectProbe,
    Conclusion,
    Delivery,
    Dispatch,
    JobRun,
    Project,
)
from ..outbox.engine import row_kick
from ..results.cells import failed_tests_for_jobs, reported_environment

logger = logging.getLogger(__name__)
Outcome = BisectProbe.Outcome


# --- the budget -----------------------------------------------------------------------------------


def day_start(now=None) -> datetime:
    """00:00 UTC of the day `now` falls in: the budget is per UTC day."""
    now = now or timezone.now()
    return datetime.combine(now.astimezone(UTC).date(), time.min, tzinfo=UTC)


def budget_left(project: Project, now=None) -> int:
    spent = BisectProbe.objects.filter(project=project, created_at__gte=day_start(now)).count()
    return max(0, project.bisect_daily_budget - spent)


def next_day(now=None) -> datetime:
    return day_start(now) + timedelta(days=1)


# --- one probe ------------------------------------------------------------------------------------


class OverBudget(Exception):
    """The backend's probes for today are spent."""


def probe_make(bisection: Bisection, index: int, role: str) -> BisectProbe:
    """Dispatch the commit at `index` of the bisection's span; the caller holds the row's lock.
    The send is kicked after commit (the outbox sweeper sends it if the broker cannot)."""
    project = bisection.project
    if budget_left(project) < 1:
        raise OverBudget(f"the daily budget of {project.bisect_daily_budget} probes is spent")
    number = bisection.probes.count() + 1
    sha = bisection.span[index]
    delivery = Delivery.objects.create(
        guid=probe_guid(bisection.pk, number),
        event=BISECT_EVENT,
        action=role,
        outcome=Delivery.Outcome.RELAYED,
        head_sha=sha,
        reason=f"bisection {bisection.pk}, probe {number}",
        payload={"head_sha": sha},
    )
    dispatch = Dispatch.objects.create(delivery=delivery, project=project, event_type=BISECT_EVENT, head_sha=sha)
    probe = BisectProbe.objects.create(
        bisection=bisection, number=number, role=role, sha=sha, index=index, dispatch=dispatch, project=project
    )
    transaction.on_commit(lambda: row_kick(Dispatch.SEND_TASK, dispatch.pk, label="bisection probe"))
    return probe


def probe_guid(bisection_id: int, number: int) -> str:
    """The probe's delivery id: what the backend echoes as `delivery_id`; never a GitHub GUID."""
    return f"{PROBE_KEY_PREFIX}{bisection_id}-{number}"


def probe_payload(dispatch: Dispatch) -> dict:
    """What a probe tells the backend beside the usual keys: the commit, the bisection and probe,
    and the tests to run (their ids and the failing job's name), so it runs only those."""
    probe = dispatch.probe
    bisection = probe.bisection
    return {
        "id": bisection.pk,
        "probe": probe.number,
        "role": probe.role,
        "sha": probe.sha,
        "tests": bisection.tests,
        "jobs": sorted({test["job"] for test in bisection.tests if test.get("job")}),
    }


# --- what the answer says -------------------------------------------------------------------------

SWEPT = (JobRun.EndedBy.TIMED_OUT, JobRun.EndedBy.NEVER_STARTED)
UNSENDABLE = (Dispatch.State.FAILED, Dispatch.State.NOT_INSTALLED, Dispatch.State.SUPERSEDED)


def probe_outcome(probe: BisectProbe) -> str:
    """The probe's verdict on the tests, from the latest attempt of each job that answered it:
    fail when any lists one of them failing; timed out when a job never started or never
    finished (the results sweeper ended it, as it ends any dispatch's); pass when every job
    passed, or reported per-test results without listing them; otherwise no verdict (error).
    Pending while nothing answered or a job still runs."""
    dispatch = probe.dispatch
    if dispatch is None or dispatch.state in UNSENDABLE:
        return Outcome.UNDELIVERABLE
    jobs = _latest_attempts(JobRun.objects.filter(dispatch=dispatch))
    if not jobs or any(job.status != JobRun.Status.COMPLETED for job in jobs):
        return Outcome.PENDING
    if _tests_failing(probe, jobs):
        return Outcome.FAIL
    if any(job.ended_by in SWEPT for job in jobs):
        return Outcome.TIMED_OUT
    if all(job.conclusion == Conclusion.SUCCESS or job.tests_total is not None for job in jobs):
        return Outcome.PASS
    return Outcome.ERROR


def _latest_attempts(jobs) -> list[JobRun]:
    latest: dict[tuple, JobRun] = {}
    for job in jobs.order_by("run_attempt", "id"):
        latest[(job.workflow_name, job.job_name)] = job
    return list(latest.values())


def _tests_failing(probe: BisectProbe, jobs: list[JobRun]) -> bool:
    """Whether a job lists one of the bisected tests failing, by the test store's exact identity:
    another test whose `Class.method` merely ends a wanted id is another test, and says nothing."""
    wanted = {test["test_id"] for test in probe.bisection.tests}
    device = probe.project.device_type
    for reported in failed_tests_for_jobs([job.pk for job in jobs]).values():
        if any(tid.full in wanted for tid in report_ids(reported, device, reported_environment(reported))):
            return True
    return False
