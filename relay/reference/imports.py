"""Importing the OpenReg reference's runs from upstream CI: for an upstream SHA, the workflow
runs GitHub Actions made, their jobs whose names match the reference pattern (PyTorch runs
OpenReg as the `openreg` test config, job names like `test (openreg, 1, 1, …)`), each job's
conclusion and URL, and its per-test results from where PyTorch keeps them (S3 test reports,
GitHub artifacts, the job's log: relay.reference.reports), with the source recorded. They land
as JobRun rows of the registered reference project, linked to the upstream job: the baseline is
PyTorch's own run, not a copy."""

import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from relay.inputs.linear import linear
from relay.inputs.params import aware_datetime
from relay.policy.links import short_sha

from .. import follow_up
from ..enablement.counts import counts_write
from ..github import client as github
from ..github.upstream import upstream_installation_id
from ..models import Conclusion, FailedTest, JobRun, Project, UpstreamCommit
from .reports import Found, find_reports, retrying

logger = logging.getLogger(__name__)
RECHECK_SECONDS = 300
"""A SHA whose upstream runs are not finished is looked at again at most this often."""
RESULTS_GRACE = timedelta(minutes=30)
"""A finished job whose per-test results were not found yet is looked for again this long after
it finished (GitHub serves a job's log a little after the job ends)."""
_TEST_FIELDS = (
    "tests_passed",
    "tests_failed",
    "tests_skipped",
    "tests_error",
    "tests_xfailed",
    "tests_xpassed",
    "tests_accelerator_ran",
    "tests_total",
    "failed_tests_truncated",
    "tests_source",
)


@dataclass
class ReferenceImport:
    sha: str
    jobs: int = 0
    with_tests: int = 0
    notes: list[str] = field(default_factory=list)
    sources: Counter = field(default_factory=Counter)
    """How many jobs' per-test results each source gave."""

    @property
    def summary(self) -> str:
        via = ", ".join(f"{n} via {JobRun.TestsSource(s).label}" for s, n in sorted(self.sources.items()))
        return (
            f"{short_sha(self.sha)}: {self.jobs} reference jobs, {self.with_tests} with per-test results"
            + (f" [{via}]" if via else "")
            + (f" ({'; '.join(self.notes)})" if self.notes else "")
        )


def reference_project() -> Project | None:
    return Project.objects.reference()


def reference_import(sha: str) -> ReferenceImport:
    sha = sha.lower()
    result = ReferenceImport(sha)
    project = reference_project()
    if project is None:
        result.notes.append("no active reference project is registered")
        return result
    auth = f"token {github.installation_token(upstream_installation_id())}"
    runs = retrying(
        lambda: github.paginate(
            f"/repos/{settings.CRCR_UPSTREAM_REPO}/actions/runs?head_sha={sha}&per_page=100",
            auth=auth,
            key="workflow_runs",
        )
    )
    workflows = linear(settings.CRCR_REFERENCE_WORKFLOW_PATTERN)
    for run in runs:
        if workflows.search(run.get("name") or ""):
            _import_run(project, sha, run, auth, result)
    return result


def _import_run(project: Project, sha: str, run: dict, auth: str, result: ReferenceImport) -> None:
    pattern = linear(settings.CRCR_REFERENCE_JOB_PATTERN)
    path = f"/repos/{settings.CRCR_UPSTREAM_REPO}/actions/runs/{run['id']}"
    jobs = [
        j
        for j in retrying(lambda: github.paginate(f"{path}/jobs?filter=latest&per_page=100", auth=auth, key="jobs"))
        if pattern.search(j.get("name", ""))
    ]
    if not jobs:
        return
    have = _with_tests(project, sha, run)
    stored = frozenset(j["id"] for j in jobs if _attempt_key(run, j) in have)
    found = find_reports(path, run, jobs, auth, result.notes, skip=stored)
    for job in jobs:
        _store(project, sha, run, job, found.get(job["id"]))
        result.jobs += 1
        result.with_tests += _attempt_key(run, job) in have
        if job["id"] in found:
            result.with_tests += 1
            result.sources[found[job["id"]].source] += 1


def _attempt_key(run: dict, job: dict) -> tuple[int, str]:
    return int(job.get("run_attempt") or run.get("run_attempt") or 1), job["name"][:255]


def _with_tests(project: Project, sha: str, run: dict) -> set[tuple[int, str]]:
    """The run's jobs already stored with per-test results: a finished attempt's results do not
    change, so they are not downloaded again when the SHA is looked at for another job."""
    rows = JobRun.objects.filter(project=project, delivery_key=sha, run_id=str(run["id"]), tests_total__isnull=False)
    return set(rows.values_list("run_attempt", "job_name"))


def _conclusion(job: dict) -> str:
    value = job.get("conclusion") or ""
    return value if value in Conclusion.values else ("" if not value else Conclusion.FAILURE)


def _store(project: Project, sha: str, run: dict, job: dict, found: Found | None) -> None:
    report = found.report if found else None
    completed = job.get("status") == "completed" and _conclusion(job)
    commit = UpstreamCommit.objects.filter(sha=sha).only("pr_number").first()
    key = {
        "delivery_key": sha,
        "project": project,
        "run_id": str(run["id"]),
        "run_attempt": _attempt_key(run, job)[0],
        "job_name": _attempt_key(run, job)[1],
    }
    fields = {
        "workflow_name": (run.get("name") or "")[:255],
        "event_type": (run.get("event") or "")[:32],
        "head_sha": sha,
        "pr_number": commit.pr_number if commit else None,
        "status": JobRun.Status.COMPLETED if completed else JobRun.Status.IN_PROGRESS,
        "conclusion": _conclusion(job) if completed else "",
        "ended_by": JobRun.EndedBy.UPSTREAM_IMPORT,
        "workflow_url": job.get("html_url") or run.get("html_url") or "",
        "completed_at": timezone.now() if completed else None,
        "reported_started_at": aware_datetime(job.get("started_at")),
        "reported_completed_at": aware_datetime(job.get("completed_at")) if completed else None,
        "tests_passed": report.passed if report else None,
        "tests_failed": report.failed if report else None,
        "tests_skipped": report.skipped if report else None,
        "tests_total": report.total if report else None,
        "tests_error": report.error if report else None,
        "tests_xfailed": report.xfailed if report else None,
        "tests_xpassed": report.xpassed if report else None,
        "tests_accelerator_ran": report.accelerator_ran if report and report.accelerator_ran else None,
        "failed_tests_truncated": bool(report and report.truncated),
        "tests_source": found.source if found else "",
    }
    if report is None:  # nothing found this time: what an earlier look found stays
        fields = {k: v for k, v in fields.items() if k not in _TEST_FIELDS}
    with transaction.atomic():
        row, _ = JobRun.objects.update_or_create(**key, defaults=fields)
        if report:
            row.failed_tests.all().delete()
            FailedTest.objects.bulk_create(FailedTest(job_run=row, **vars(t)) for t in report.failed_tests)
            if row.status == JobRun.Status.COMPLETED:
                counts_write(row.pk, project.pk, sha, row.created_at, report.modules)
        follow_up.job_recorded(row.pk)


def shas_to_import(hours: int, limit: int) -> list[str]:
    """Recent trunk commits and PR heads whose reference result is missing or unfinished (a job
    still running, or finished within RESULTS_GRACE without per-test results), each looked at no
    more than every RECHECK_SECONDS."""
    since = timezone.now() - timedelta(hours=hours)
    imported = JobRun.objects.filter(ended_by=JobRun.EndedBy.UPSTREAM_IMPORT)
    unfinished = imported.filter(
        Q(status=JobRun.Status.IN_PROGRESS)
        | Q(tests_total__isnull=True, reported_completed_at__gte=timezone.now() - RESULTS_GRACE)
    ).values("head_sha")
    done = imported.filter(status=JobRun.Status.COMPLETED).exclude(head_sha__in=unfinished).values("head_sha")
    candidates = (
        UpstreamCommit.objects.filter(landed_at__gte=since)
        .exclude(sha__in=done)
        .order_by("-landed_at")
        .values_list("sha", flat=True)
    )
    picked = []
    for sha in candidates[: limit * 5]:
        if cache.add(f"reference-import-checked:{sha}", 1, RECHECK_SECONDS):
            picked.append(sha)
        if len(picked) == limit:
            break
    return picked


def reference_import_sweep(hours: int = 48, limit: int = 20) -> list[str]:
    summaries = []
    for sha in shas_to_import(hours, limit):
        try:
            summaries.append(reference_import(sha).summary)
        except github.GitHubError as exc:
            logger.warning("reference import of %s failed, will retry: %s", sha, exc)
            cache.delete(f"reference-import-checked:{sha}")
    return summaries
