"""Importing the OpenReg reference's runs from upstream CI: for an upstream SHA, the workflow
runs GitHub Actions made, their jobs whose names match the reference pattern (PyTorch runs
OpenReg as the `openreg` test config, job names like `test (openreg, 1, 1, …)`), each job's
conclusion and URL, and the test-report artifacts (zips of JUnit XML) when they exist. They land
as JobRun rows of the registered reference project, linked to the upstream job: the baseline is
PyTorch's own run, not a copy."""

import io
import logging
import re
import time
import zipfile
from dataclasses import dataclass, field
from datetime import timedelta

import httpx
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from . import follow_up
from .callbacks.junit import MalformedReport, TestReport, junit_parse
from .github import client as github
from .github.upstream import upstream_installation_id
from .models import Conclusion, FailedTest, JobRun, Project, UpstreamCommit

logger = logging.getLogger(__name__)
MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
TRANSIENT_TRIES = 3
RECHECK_SECONDS = 300
"""A SHA whose upstream runs are not finished is looked at again at most this often."""


@dataclass
class ImportResult:
    sha: str
    jobs: int = 0
    with_tests: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        return f"{self.sha[:12]}: {self.jobs} reference jobs, {self.with_tests} with per-test results" + (
            f" ({'; '.join(self.notes)})" if self.notes else ""
        )


def reference_project() -> Project | None:
    return Project.objects.filter(is_reference=True, active=True).order_by("id").first()


def reference_import(sha: str) -> ImportResult:
    sha = sha.lower()
    result = ImportResult(sha)
    project = reference_project()
    if project is None:
        result.notes.append("no active reference project is registered")
        return result
    auth = f"token {github.installation_token(upstream_installation_id())}"
    runs = _retrying(
        lambda: github.paginate(
            f"/repos/{settings.CRCR_UPSTREAM_REPO}/actions/runs?head_sha={sha}&per_page=100",
            auth=auth,
            key="workflow_runs",
        )
    )
    workflows = re.compile(settings.CRCR_REFERENCE_WORKFLOW_PATTERN)
    for run in runs:
        if workflows.search(run.get("name") or ""):
            _import_run(project, sha, run, auth, result)
    return result


def _retrying(call):
    """GitHub's 5xx and rate limits are retried a few times, briefly; the sweep retries later."""
    for attempt in range(TRANSIENT_TRIES):
        try:
            return call()
        except github.TransientGitHubError as exc:
            if attempt == TRANSIENT_TRIES - 1 or (exc.retry_after or 0) > 10:
                raise
            time.sleep(0.5 * 2**attempt)


def _import_run(project: Project, sha: str, run: dict, auth: str, result: ImportResult) -> None:
    pattern = re.compile(settings.CRCR_REFERENCE_JOB_PATTERN)
    path = f"/repos/{settings.CRCR_UPSTREAM_REPO}/actions/runs/{run['id']}"
    jobs = [
        j
        for j in _retrying(lambda: github.paginate(f"{path}/jobs?filter=latest&per_page=100", auth=auth, key="jobs"))
        if pattern.search(j.get("name", ""))
    ]
    if not jobs:
        return
    reports = _reports(path, jobs, auth, result)
    for job in jobs:
        report = reports.get(job["id"])
        _store(project, sha, run, job, report)
        result.jobs += 1
        result.with_tests += report is not None


def _reports(path: str, jobs: list[dict], auth: str, result: ImportResult) -> dict[int, TestReport]:
    artifacts = _retrying(lambda: github.paginate(f"{path}/artifacts?per_page=100", auth=auth, key="artifacts"))
    pattern = re.compile(settings.CRCR_REFERENCE_REPORT_PATTERN)
    reports: dict[int, TestReport] = {}
    for artifact in artifacts:
        if not pattern.search(artifact.get("name", "")):
            continue
        job = _job_for(artifact, jobs)
        if job is None:
            continue
        if artifact.get("expired"):
            result.notes.append(f"artifact {artifact['name']} has expired")
            continue
        report = _artifact_report(artifact, auth, result)
        if report is not None:
            reports.setdefault(job["id"], TestReport()).merge(report)
    return reports


def _job_for(artifact: dict, jobs: list[dict]) -> dict | None:
    """PyTorch names report artifacts after the job id; a run with one matching job owns them all."""
    named = [j for j in jobs if str(j["id"]) in artifact.get("name", "")]
    if named:
        return named[0]
    return jobs[0] if len(jobs) == 1 else None


def _artifact_report(artifact: dict, auth: str, result: ImportResult) -> TestReport | None:
    try:
        data = _download(artifact["archive_download_url"], auth)
        return _zip_report(data, artifact["name"], result)
    except (github.GitHubError, httpx.HTTPError, zipfile.BadZipFile, ValueError) as exc:
        result.notes.append(f"artifact {artifact['name']}: {exc}")
        return None


def _download(url: str, auth: str) -> bytes:
    """GitHub answers 302 to blob storage; follow it without our token (it must not leak there)."""
    first = github.http_client().get(url, headers={"Authorization": auth}, follow_redirects=False)
    if first.status_code in (301, 302, 303, 307, 308):
        url, first = first.headers["location"], None
    if first is not None:
        if first.status_code >= 400:
            raise github.classify_error(first)
        return first.content[:MAX_ARTIFACT_BYTES]
    with httpx.stream("GET", url, timeout=60, follow_redirects=False) as response:
        response.raise_for_status()
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > MAX_ARTIFACT_BYTES:
                raise ValueError(f"artifact larger than {MAX_ARTIFACT_BYTES // 2**20} MB")
            chunks.append(chunk)
    return b"".join(chunks)


def _zip_report(data: bytes, name: str, result: ImportResult) -> TestReport | None:
    merged, parsed = TestReport(), 0
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for member in archive.infolist():
            if not member.filename.endswith(".xml") or member.file_size > MAX_ARTIFACT_BYTES:
                continue
            try:
                merged.merge(junit_parse(archive.read(member), f"{name}/{member.filename}"))
                parsed += 1
            except MalformedReport as exc:
                result.notes.append(str(exc))
    return merged if parsed else None


def _conclusion(job: dict) -> str:
    value = job.get("conclusion") or ""
    return value if value in Conclusion.values else ("" if not value else Conclusion.FAILURE)


def _store(project: Project, sha: str, run: dict, job: dict, report: TestReport | None) -> None:
    completed = job.get("status") == "completed" and _conclusion(job)
    commit = UpstreamCommit.objects.filter(sha=sha).only("pr_number").first()
    key = {
        "delivery_key": sha,
        "project": project,
        "run_id": str(run["id"]),
        "run_attempt": int(job.get("run_attempt") or run.get("run_attempt") or 1),
        "job_name": job["name"][:255],
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
        "tests_passed": report.passed if report else None,
        "tests_failed": report.failed if report else None,
        "tests_skipped": report.skipped if report else None,
        "tests_total": report.total if report else None,
        "tests_error": report.error if report else None,
        "tests_xfailed": report.xfailed if report else None,
        "tests_xpassed": report.xpassed if report else None,
        "failed_tests_truncated": bool(report and report.truncated),
    }
    with transaction.atomic():
        row, _ = JobRun.objects.update_or_create(**key, defaults=fields)
        row.failed_tests.all().delete()
        if report:
            FailedTest.objects.bulk_create(FailedTest(job_run=row, **vars(t)) for t in report.failed_tests)
        follow_up.job_recorded(row.pk)


def shas_to_import(hours: int, limit: int) -> list[str]:
    """Recent trunk commits and PR heads whose reference result is missing or unfinished, each
    looked at no more than every RECHECK_SECONDS."""
    since = timezone.now() - timedelta(hours=hours)
    done = JobRun.objects.filter(ended_by=JobRun.EndedBy.UPSTREAM_IMPORT, status=JobRun.Status.COMPLETED).values(
        "head_sha"
    )
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
