"""Where the OpenReg reference's per-test results are found, in the order they are looked for:

1. **S3**: PyTorch's Linux test jobs upload their JUnit zips to the public `gha-artifacts` bucket,
   key `<owner>/<repo>/<run_id>/<run_attempt>/artifact/test-reports-<suffix>_<job_id>.zip`, read by
   anonymous HTTPS GET under CRCR_REFERENCE_ARTIFACT_BASE (empty: not looked at).
2. **GitHub Actions artifacts** of the run (jobs with the `use-gha` input upload there instead).
3. **The job's log**: the `openreg` config runs OpenReg's suites with `unittest discover -v`, whose
   per-test outcomes are printed, not written as XML (relay.reference.unittest_log).

Every download is bounded (bytes, zip members, unpacked bytes, wall-clock time); a bad zip, XML or
log is noted in the import's summary, logged, and skipped: the job keeps its job-level result."""

import io
import logging
import time
import zipfile
from dataclasses import dataclass

import httpx
from django.conf import settings

from relay.inputs.linear import linear

from ..github import client as github
from ..models import JobRun
from .junit import MalformedReport, TestReport, junit_parse
from .unittest_log import IncompleteLog, unittest_log_parse

logger = logging.getLogger(__name__)
Source = JobRun.TestsSource
MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
MAX_ZIP_MEMBERS = 5000
MAX_UNZIPPED_BYTES = 512 * 1024 * 1024
MAX_MEMBER_BYTES = 64 * 1024 * 1024
"""One XML file, unpacked: it is read into memory whole."""
MAX_LOG_BYTES = 64 * 1024 * 1024
TRANSIENT_TRIES = 3
DOWNLOAD_SECONDS = 120
"""Wall-clock limit of one download, on top of httpx's per-read timeout (a slow drip ends too)."""
_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
_REDIRECTS = (301, 302, 303, 307, 308)
_ABSENT = (403, 404)
"""S3 answers 403 to an anonymous reader for a key that does not exist where listing is off."""
_SHARD = linear(r"(?P<job>[\w.-]+) \((?P<config>[^,()]+), (?P<shard>\d+), (?P<num_shards>\d+), (?P<runner>[^,()]+)[,)]")


class TooLarge(ValueError):
    pass


@dataclass
class Found:
    report: TestReport
    source: str
    """A JobRun.TestsSource value."""


def find_reports(
    path: str, run: dict, jobs: list[dict], auth: str, notes: list[str], skip: frozenset[int] = frozenset()
) -> dict[int, Found]:
    """job id → its per-test results from the first source that has them, for finished jobs not
    in `skip` (all of the run's matching jobs still decide who owns an unnamed artifact)."""
    finished = [j for j in jobs if j.get("status", "completed") == "completed" and j["id"] not in skip]
    found: dict[int, Found] = {}
    for job in finished:
        if (report := s3_report(run, job, notes)) is not None:
            found[job["id"]] = Found(report, Source.S3)
    missing = [j for j in finished if j["id"] not in found]
    if missing:
        for job_id, report in artifact_reports(path, jobs, auth, notes).items():
            if job_id not in found and any(j["id"] == job_id for j in missing):
                found[job_id] = Found(report, Source.ARTIFACT)
    for job in (j for j in missing if j["id"] not in found):
        if (report := log_report(job, auth, notes)) is not None:
            found[job["id"]] = Found(report, Source.LOG)
    return found


def retrying(call):
    """GitHub's 5xx and rate limits are retried a few times, briefly; the sweep retries later."""
    for attempt in range(TRANSIENT_TRIES):
        try:
            return call()
        except github.TransientGitHubError as exc:
            if attempt == TRANSIENT_TRIES - 1 or (exc.retry_after or 0) > 10:
                raise
            time.sleep(0.5 * 2**attempt)


# --- 1. S3 ------------------------------------------------------------------------------------------
def s3_names(job: dict) -> list[str]:
    """The zip names a job's reports may have. PyTorch's upload step names them
    `test-reports-${{ github.job }}-<config>-<shard>-<num_shards>-<runner>_<job id>.zip` (github.job
    is the word before the parenthesis, `test`); the form without it is tried second."""
    match = _SHARD.search(job.get("name") or "")
    if match is None:
        return []
    shard = "-".join(match[k].strip() for k in ("config", "shard", "num_shards", "runner"))
    return [f"test-reports-{match['job']}-{shard}_{job['id']}.zip", f"test-reports-{shard}_{job['id']}.zip"]


def s3_url(run: dict, job: dict, name: str) -> str:
    attempt = int(job.get("run_attempt") or run.get("run_attempt") or 1)
    base = settings.CRCR_REFERENCE_ARTIFACT_BASE.rstrip("/")
    return f"{base}/{settings.CRCR_UPSTREAM_REPO}/{run['id']}/{attempt}/artifact/{name}"


def s3_report(run: dict, job: dict, notes: list[str]) -> TestReport | None:
    if not settings.CRCR_REFERENCE_ARTIFACT_BASE:
        return None
    for name in s3_names(job):
        try:
            data = fetch_bounded(s3_url(run, job, name), MAX_ARTIFACT_BYTES)
        except (httpx.HTTPError, TooLarge) as exc:
            return _skipped(notes, f"S3 {name}", exc)
        if data is not None:
            return zip_report(data, name, notes)
    return None


# --- 2. GitHub Actions artifacts ---------------------------------------------------------------------
def artifact_reports(path: str, jobs: list[dict], auth: str, notes: list[str]) -> dict[int, TestReport]:
    artifacts = retrying(lambda: github.paginate(f"{path}/artifacts?per_page=100", auth=auth, key="artifacts"))
    pattern = linear(settings.CRCR_REFERENCE_REPORT_PATTERN)
    reports: dict[int, TestReport] = {}
    for artifact in artifacts:
        job = _job_for(artifact, jobs) if pattern.search(artifact.get("name", "")) else None
        if job is None:
            continue
        if artifact.get("expired"):
            notes.append(f"artifact {artifact['name']} has expired")
            continue
        report = _artifact_report(artifact, auth, notes)
        if report is not None:
            reports.setdefault(job["id"], TestReport()).merge(report)
    return reports


def _job_for(artifact: dict, jobs: list[dict]) -> dict | None:
    """PyTorch names report artifacts after the job id; a run with one matching job owns them all."""
    named = [j for j in jobs if str(j["id"]) in artifact.get("name", "")]
    if named:
        return named[0]
    return jobs[0] if len(jobs) == 1 else None


def _artifact_report(artifact: dict, auth: str, notes: list[str]) -> TestReport | None:
    try:
        data = github_download(artifact["archive_download_url"], auth, MAX_ARTIFACT_BYTES)
    except (github.GitHubError, httpx.HTTPError, TooLarge) as exc:
        return _skipped(notes, f"artifact {artifact['name']}", exc)
    return zip_report(data, artifact["name"], notes) if data is not None else None


# --- 3. the job's log -------------------------------------------------------------------------------
def log_report(job: dict, auth: str, notes: list[str]) -> TestReport | None:
    url = f"{settings.GITHUB_API_URL}/repos/{settings.CRCR_UPSTREAM_REPO}/actions/jobs/{job['id']}/logs"
    try:
        data = github_download(url, auth, MAX_LOG_BYTES)
        parsed = unittest_log_parse(data.decode("utf-8", "replace"), f"log of job {job['id']}") if data else None
    except (github.GitHubError, httpx.HTTPError, TooLarge, IncompleteLog) as exc:
        return _skipped(notes, f"log of job {job['id']}", exc)
    return parsed.test_report() if parsed is not None else None


# --- downloads and zips -----------------------------------------------------------------------------
def github_download(url: str, auth: str, limit: int) -> bytes | None:
    """GitHub answers 302 to blob storage; follow it without our token (it must not leak there).
    None when GitHub has nothing there (404)."""
    try:
        first = github.http_client().get(url, headers={"Authorization": auth}, follow_redirects=False)
    except httpx.TimeoutException as exc:
        raise github.TransientGitHubError(f"GitHub timed out: {exc.__class__.__name__}") from exc
    if first.status_code in _REDIRECTS:
        return fetch_bounded(first.headers["location"], limit, absent=())
    if first.status_code == 404:
        return None
    if first.status_code >= 400:
        raise github.classify_error(first)
    if len(first.content) > limit:
        raise TooLarge(f"larger than {limit // 2**20} MB")
    return first.content


def fetch_bounded(url: str, limit: int, absent: tuple[int, ...] = _ABSENT) -> bytes | None:
    """An anonymous GET of at most `limit` bytes in at most DOWNLOAD_SECONDS; None for a status in
    `absent` (the object is not there)."""
    deadline = time.monotonic() + DOWNLOAD_SECONDS
    with httpx.stream("GET", url, timeout=_TIMEOUT, follow_redirects=False) as response:
        if response.status_code in absent:
            return None
        response.raise_for_status()
        if int(response.headers.get("content-length") or 0) > limit:
            raise TooLarge(f"larger than {limit // 2**20} MB")
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > limit:
                raise TooLarge(f"larger than {limit // 2**20} MB")
            if time.monotonic() > deadline:
                raise TooLarge(f"not downloaded within {DOWNLOAD_SECONDS} s")
            chunks.append(chunk)
    return b"".join(chunks)


def zip_report(data: bytes, name: str, notes: list[str]) -> TestReport | None:
    """The JUnit XML files in a test-report zip, merged; None when it holds none or is unusable."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = [m for m in archive.infolist() if m.filename.endswith(".xml") and not m.is_dir()]
            _check_zip(members)
            return _merged(archive, members, name, notes)
    except (zipfile.BadZipFile, TooLarge, OSError, EOFError, RuntimeError, NotImplementedError) as exc:
        return _skipped(notes, name, exc)


def _check_zip(members: list[zipfile.ZipInfo]) -> None:
    if len(members) > MAX_ZIP_MEMBERS:
        raise TooLarge(f"{len(members)} XML files, more than {MAX_ZIP_MEMBERS}")
    unpacked = sum(m.file_size for m in members)
    if unpacked > MAX_UNZIPPED_BYTES:
        raise TooLarge(f"{unpacked // 2**20} MB unpacked, more than {MAX_UNZIPPED_BYTES // 2**20} MB")


def _merged(archive: zipfile.ZipFile, members, name: str, notes: list[str]) -> TestReport | None:
    merged, parsed = TestReport(), 0
    for member in members:
        if member.file_size > MAX_MEMBER_BYTES:
            notes.append(f"{name}/{member.filename}: larger than {MAX_MEMBER_BYTES // 2**20} MB unpacked, skipped")
            continue
        try:
            merged.merge(junit_parse(archive.read(member), f"{name}/{member.filename}"))
            parsed += 1
        except MalformedReport as exc:
            notes.append(str(exc))
    return merged if parsed else None


def _skipped(notes: list[str], what: str, exc: Exception) -> None:
    logger.warning("reference import: %s skipped: %s", what, exc)
    notes.append(f"{what}: {exc}")
