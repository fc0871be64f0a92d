"""The health probe's figures that the relay alerts on (relay/health/alerts.py) and /metrics exports:
the jobs of the probe repo (pytorch/crcr-test), judged by the probe rule (relay.policy.verdicts,
rule 7), with retries deduplicated as upstream's dashboards do: the latest attempt of each
(run_id, job_name) counts (`latest_per_run_job`).

- **unexpected nightly outcomes**: latest attempts of nightly probe jobs that completed in the
  window and did not end as they are built to;
- **PR pass rate**: of the last N relayed PRs the probe decided (every job's latest attempt
  completed), the share that passed, every job ending as built (a count window, so a quiet
  weekend does not swing it);
- **the last completed nightly probe**: when a nightly probe job last completed by callback (a
  job the sweeper ended did not complete);
- **recent heads** (`probe_heads`): its latest few head SHAs of a kind of run, each judged by the
  probe rule, as /crcr's health card shows them."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max

from relay.models import JobRun, Project
from relay.policy.verdicts import STATES, Counts, State, job_verdicts, latest_attempt, probe_state
from relay.stats.runkinds import Figure, counted_q, tab_q

NIGHTLY = "nightly"
RERUN_REACH = timedelta(days=3)
"""How far before a window a run's earlier attempts may lie (GitHub keeps a run re-runnable 3 days)."""
PR_ROWS_READ = 5000
"""At most this many of the probe's newest PR job rows are read to find its last PRs."""
FIELDS = (
    "id",
    "project_id",
    "status",
    "conclusion",
    "ended_by",
    "run_id",
    "run_attempt",
    "workflow_name",
    "job_name",
    "pr_number",
    "head_sha",
    "event_type",
    "workflow_url",
    "check_run_id",
    "job_id",
    "created_at",
    "in_progress_at",
    "completed_at",
    "reported_completed_at",
)


SWEEP_ALLOWANCE = timedelta(minutes=10)
OVERDUE_GRACE = timedelta(minutes=15)
"""A job in progress longer than the timeout, a sweep interval and this grace has been missed by the
sweeper: 385 minutes at the 6 h default, upstream's probe rule (6 h + 10 min sweep + 15 min grace)."""


def stuck_after() -> timedelta:
    return timedelta(hours=settings.CRCR_JOB_TIMEOUT_HOURS) + SWEEP_ALLOWANCE + OVERDUE_GRACE


def probe_project() -> Project | None:
    return Project.objects.filter(is_health_probe=True, active=True).order_by("id").first()


def latest_per_run_job(jobs) -> list:
    """One row per (run_id, job_name): its latest attempt (relay.policy.verdicts orders them)."""
    grouped: dict[tuple[str, str], list] = {}
    for job in jobs:
        grouped.setdefault((job.run_id, job.job_name), []).append(job)
    return [latest_attempt(attempts) for attempts in grouped.values()]


def passed(job) -> bool:
    return probe_state(job) == State.SUCCESS


def decided(job) -> bool:
    """Completed and counted: superseded work counts nowhere."""
    return job.status == JobRun.Status.COMPLETED and probe_state(job) != State.SUPERSEDED


def ended_at(job) -> datetime | None:
    return job.completed_at or job.reported_completed_at


# --- rule 1: unexpected nightly outcomes ----------------------------------------------------------


def nightly_jobs(probe: Project, since: datetime) -> list:
    """The latest attempt of every nightly probe job run since `since` (with earlier attempts)."""
    rows = JobRun.objects.filter(project=probe, event_type=NIGHTLY, created_at__gte=since - RERUN_REACH)
    return latest_per_run_job(rows.only(*FIELDS))


def nightly_unexpected(probe: Project, now: datetime, hours: float) -> list:
    """Latest attempts of nightly probe jobs that completed in the last `hours` and did not end
    as they are built to, newest first."""
    since = now - timedelta(hours=hours)
    jobs = [j for j in nightly_jobs(probe, since) if decided(j) and (ended_at(j) or now) >= since]
    return sorted((j for j in jobs if not passed(j)), key=lambda j: ended_at(j) or now, reverse=True)


# --- rule 2: pass rate over the last relayed PRs --------------------------------------------------


@dataclass
class ProbePr:
    number: int
    jobs: list = field(default_factory=list)
    """Latest attempt per (run_id, job_name)."""

    @property
    def decided(self) -> bool:
        return bool(self.jobs) and all(j.status == JobRun.Status.COMPLETED for j in self.jobs)

    @property
    def counted(self) -> list:
        return [j for j in self.jobs if decided(j)]

    @property
    def passed(self) -> bool:
        return all(passed(j) for j in self.counted)

    @property
    def last_at(self) -> datetime | None:
        return max((j.created_at for j in self.jobs), default=None)


@dataclass
class PassRate:
    prs: list
    """The last decided PRs, newest first."""

    @property
    def passed(self) -> int:
        return sum(pr.passed for pr in self.prs)

    @property
    def rate(self) -> float | None:
        return self.passed / len(self.prs) if self.prs else None


def last_prs(probe: Project, count: int) -> list[ProbePr]:
    """The probe's newest PRs (by their newest job), each with its jobs deduplicated."""
    newest = (
        JobRun.objects.filter(project=probe, event_type="pull_request", pr_number__isnull=False)
        .values("pr_number")
        .annotate(last=Max("created_at"))
        .order_by("-last")[: count * 2]
    )
    numbers = [row["pr_number"] for row in newest]
    rows = JobRun.objects.filter(project=probe, event_type="pull_request", pr_number__in=numbers)
    by_pr: dict[int, list] = {}
    for job in rows.only(*FIELDS).order_by("-id")[:PR_ROWS_READ]:
        by_pr.setdefault(job.pr_number, []).append(job)
    prs = [ProbePr(number, latest_per_run_job(by_pr.get(number, []))) for number in numbers]
    return [pr for pr in prs if pr.jobs]


def pr_pass_rate(probe: Project, count: int) -> PassRate:
    """Of the last `count` PRs whose probe jobs are all decided, the share that passed (a PR
    still running is not counted yet; the sweeper decides one that hangs)."""
    return PassRate([pr for pr in last_prs(probe, count) if pr.decided and pr.counted][:count])


# --- rule 3: the last completed nightly probe -----------------------------------------------------


def last_nightly_completed_at(probe: Project) -> datetime | None:
    done = JobRun.objects.filter(
        project=probe, event_type=NIGHTLY, status=JobRun.Status.COMPLETED, ended_by=JobRun.EndedBy.CALLBACK
    )
    return done.aggregate(last=Max("completed_at"))["last"]


# --- the health probe ----------------------------------------------------------------------------------

PROBE_SHAS = 5
PROBE_LOOKBACK = timedelta(days=14)


@dataclass
class ProbeHead:
    sha: str
    state: str
    """pass | fail | running, by relay.policy.verdicts.probe_state over the head's jobs."""
    last_at: datetime


def probe_heads(probe: Project, tab: str, now: datetime) -> list[ProbeHead]:
    """The probe's latest few head SHAs of this kind, each judged by the probe rule."""
    kinds = counted_q(Figure.BACKEND_PAGE) & tab_q(tab)
    recent = (
        JobRun.objects.filter(kinds, project=probe, created_at__gte=now - PROBE_LOOKBACK)
        .values("head_sha")
        .annotate(last=Max("created_at"))
        .order_by("-last")[:PROBE_SHAS]
    )
    heads = {row["head_sha"]: row["last"] for row in recent}
    jobs = JobRun.objects.filter(kinds, project=probe, head_sha__in=list(heads)).only(*FIELDS)
    by_sha: dict = {}
    for job in jobs:
        by_sha.setdefault(job.head_sha, []).append(job)
    return [ProbeHead(sha, _probe_head_state(by_sha.get(sha, [])), last) for sha, last in heads.items()]


def _probe_head_state(jobs: list) -> str:
    counts = {STATES[v.state].counts for v in job_verdicts(jobs, probe=True)}
    if counts & {Counts.FAIL, Counts.INFRA}:
        return "fail"
    return "running" if Counts.PENDING in counts else "pass"
