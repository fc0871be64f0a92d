"""Known issues: create, change, resolve; and where they were seen. Occurrences are recorded as
results arrive (a completed job's failed tests, or the job itself when it failed without one)
and, for recent results, when an issue is created or its matchers change. A resolved issue seen
again is flagged on its page and announced to subscribers (relay.notify)."""

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from relay.policy.testids import report_ids
from relay.policy.verdicts import FAILING, conclusion_state
from relay.stats.runkinds import Figure, jobs_counted

from ..models import FailedTest, JobRun, Project
from ..models.triage import IssueOccurrence, KnownIssue
from .classify import issues_load, triager_for
from .matching import Failure, cause_check, message_check, patterns_check

logger = logging.getLogger(__name__)
BACKFILL_DAYS = 14
BACKFILL_MAX_JOBS = 20_000
"""Creating an issue scans at most this many recent failing attempts for occurrences."""
EDITABLE = ("title", "url", "kind", "all_backends", "test_patterns", "message_contains", "cause", "blocks_gate")


class IssueError(ValueError):
    pass


class UnblockRefused(PermissionError):
    """Marking an issue as not blocking the gate lets a failing L4 backend through upstream's merge
    gate: only an admin may (the edges say who is one: a superuser, the API's admin scope)."""


def _may_unblock(data: dict, may_unblock: bool) -> None:
    if data.get("blocks_gate") is False and not may_unblock:
        raise UnblockRefused("only an admin may mark an issue as not blocking the gate")


def _clean(data: dict) -> dict:
    data = dict(data)
    if "test_patterns" in data:
        data["test_patterns"] = patterns_check(data["test_patterns"] or [])
    if "message_contains" in data:
        data["message_contains"] = message_check(data["message_contains"])
    if "cause" in data:
        data["cause"] = cause_check(data["cause"])
    return data


def _require_matcher(issue: KnownIssue) -> None:
    if not issue.test_patterns and not issue.message_contains and not issue.cause:
        raise IssueError("a known issue needs a test pattern, a message substring or a cause to match failures by")


@transaction.atomic
def known_issue_create(data: dict, by: str, projects=(), may_unblock: bool = False) -> KnownIssue:
    """`data` holds EDITABLE fields (PatternError/IssueError on bad matchers, UnblockRefused for
    `blocks_gate: False` unless `may_unblock`); `projects` the backends it is limited to when it is
    not for all backends."""
    _may_unblock(data, may_unblock)
    issue = KnownIssue(created_by=by[:150], **{k: v for k, v in _clean(data).items() if k in EDITABLE})
    _require_matcher(issue)
    issue.save()
    issue.projects.set(projects)
    transaction.on_commit(lambda: occurrences_backfill(issue.pk))
    return issue


@transaction.atomic
def known_issue_update(issue: KnownIssue, data: dict, projects=None, may_unblock: bool = False) -> KnownIssue:
    _may_unblock(data, may_unblock)
    changes = {k: v for k, v in _clean(data).items() if k in EDITABLE}
    for name, value in changes.items():
        setattr(issue, name, value)
    _require_matcher(issue)
    if "state" in data:
        _set_state(issue, data["state"])
    issue.save()
    if projects is not None:
        issue.projects.set(projects)
    if {"test_patterns", "message_contains", "cause", "all_backends"} & changes.keys() or projects is not None:
        transaction.on_commit(lambda: occurrences_backfill(issue.pk))
    return issue


def _set_state(issue: KnownIssue, state: str) -> None:
    if state not in KnownIssue.State.values:
        raise IssueError(f"state must be one of {', '.join(KnownIssue.State.values)}")
    if state != issue.state:
        issue.state = state
        issue.resolved_at = timezone.now() if state == KnownIssue.State.RESOLVED else None


def still_occurring(issue: KnownIssue) -> int:
    """Occurrences since the issue was resolved (0 while open): a resolved issue whose failures
    still happen is flagged."""
    if issue.state != KnownIssue.State.RESOLVED or issue.resolved_at is None:
        return 0
    return issue.occurrences.filter(seen_at__gt=issue.resolved_at).count()


# --- occurrences ----------------------------------------------------------------------------------


def job_failures(job: JobRun, tests: list, device_type: str = "") -> list[Failure]:
    """What a failing attempt reports: its tests (identities as relay.policy.testids gives them, with
    the backend's `device_type` as a hint), or the job itself when it reported none."""
    if conclusion_state(job) not in FAILING:
        return []
    if tests:
        rows = [{"name": t.name, "classname": t.classname, "file": t.file} for t in tests]
        ids = report_ids(rows, device_type, job.environment)
        return [Failure(job.project_id, tid, t.message) for t, tid in zip(tests, ids, strict=True)]
    label = f"{job.workflow_name} / {job.job_name}" if job.job_name else job.workflow_name
    return [Failure(job.project_id, label)]


def occurrences_record(job_run_id: int) -> list[IssueOccurrence]:
    """Match one attempt's failures against every known issue (open and resolved); returns the
    new occurrences. Idempotent: an attempt recorded twice adds nothing."""
    # Issues first: with none to match (a fresh install, or a quiet week), the job is never read
    # (its counted-runs filter cost a follow-up worker ~5 ms to build; this task follows every
    # failing callback: docs/performance.md) and its tests are never read or parsed.
    issues = issues_load(KnownIssue.State.values)
    if not issues:
        return []
    jobs = jobs_counted(Figure.OCCURRENCES).select_related("project")  # a probe or a clean-up is no sighting
    job = jobs.filter(pk=job_run_id, status=JobRun.Status.COMPLETED).first()
    if job is None:
        return []
    failures = job_failures(job, list(FailedTest.objects.filter(job_run=job)), job.project.device_type)
    triager = triager_for(issues)
    created = []
    for failure in failures:
        for issue in triager.issues:
            if triager.issue_for(failure, [issue]) is not None:
                created += _occurrence(issue, job, failure.text)
    return created


def _occurrence(issue: KnownIssue, job: JobRun, subject: str) -> list[IssueOccurrence]:
    row, made = IssueOccurrence.objects.get_or_create(
        issue=issue,
        job_run=job,
        test_id=subject[:1000],
        defaults={
            "project_id": job.project_id,
            "head_sha": job.head_sha,
            "seen_at": job.completed_at or job.created_at,
        },
    )
    return [row] if made else []


def occurrences_backfill(issue_pk: int, days: int = BACKFILL_DAYS) -> int:
    """Record an issue's occurrences among recent failing attempts (bounded)."""
    issue = KnownIssue.objects.filter(pk=issue_pk).first()
    if issue is None:
        return 0
    since = timezone.now() - timedelta(days=days)
    jobs = list(
        JobRun.objects.filter(status=JobRun.Status.COMPLETED, created_at__gte=since)
        .exclude(conclusion__in=["success", "neutral", "skipped"])
        .order_by("-created_at")[:BACKFILL_MAX_JOBS]
    )
    tests: dict[int, list] = {}
    for row in FailedTest.objects.filter(job_run_id__in=[j.pk for j in jobs]).only(
        "job_run_id", "name", "classname", "file", "message"
    ):
        tests.setdefault(row.job_run_id, []).append(row)
    triager = triager_for([issue])
    device_types = dict(Project.objects.filter(pk__in={j.project_id for j in jobs}).values_list("pk", "device_type"))
    count = 0
    for job in jobs:
        for failure in job_failures(job, tests.get(job.pk, []), device_types.get(job.project_id, "")):
            if triager.issue_for(failure) is not None:
                count += len(_occurrence(issue, job, failure.text))
    return count
