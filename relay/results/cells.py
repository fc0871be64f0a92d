"""The cell engine: what the store says about given upstream commits: job attempts and dispatches per (commit,
backend), one cell per pair under the status policy (relay.policy.verdicts). Every page reads its cells
here (grid, commit, PR, backend, culprits).

Every loader takes the page's SHAs and answers with one indexed query (JobRun on
(head_sha, project), Dispatch through Delivery.head_sha), so a page's cost grows with the page
and never with the table, and nothing is queried per cell."""

from collections import namedtuple
from dataclasses import dataclass, field

from django.db.models.fields.json import KeyTextTransform

from relay.models import Delivery, Dispatch, FailedTest, Level, Project
from relay.policy.verdicts import (
    FAILING,
    STATES,
    Counts,
    JobVerdict,
    State,
    attempts_in_order,
    awaiting_results_state,
    cell_state,
    dispatch_cell_state,
    job_verdicts,
    reference_state,
)
from relay.stats.runkinds import Figure, jobs_counted

from .status import StateShown

LEVEL_ORDER = {Level.L4: 0, Level.L3: 1, Level.L2: 2, Level.L1: 3}

SLIM_FIELDS = (
    "id",
    "head_sha",
    "project_id",
    "workflow_name",
    "job_name",
    "status",
    "conclusion",
    "ended_by",
    "run_id",
    "run_attempt",
    "tests_total",
    "tests_failed",
    "tests_error",
)
DETAIL_FIELDS = SLIM_FIELDS + (
    "created_at",
    "event_type",
    "pr_number",
    "workflow_url",
    "artifact_url",
    "check_run_id",
    "job_id",
    "queue_seconds",
    "execution_seconds",
    "tests_passed",
    "tests_skipped",
    "reported_started_at",
    "reported_completed_at",
    "failed_tests_truncated",
    "tests_source",
    "environment",
    "tests_xfailed",
    "tests_xpassed",
    "tests_accelerator_ran",
    "triage_verdict",
)
SlimJob = namedtuple("SlimJob", SLIM_FIELDS + ("created_at",))
"""A grid row as a light tuple: a page reads tens of thousands. Its `created_at` is the row's
rank in (created_at, run_attempt, id) order, computed by the database: the verdict policy only
compares it to order runs, and parsing 10,000 timestamps would cost more than the query."""
DetailJob = namedtuple("DetailJob", DETAIL_FIELDS)

CellKey = tuple[str, int]


# --- backends -----------------------------------------------------------------------------------


def backend_order(project: Project) -> tuple:
    """The reference pinned first, then L4, L3, L2 and L1 (dispatch only), allowlist order within."""
    return (not project.is_reference, LEVEL_ORDER.get(project.level, 9), project.position, project.full_name.lower())


def registered_backends() -> list[Project]:
    """Active backends in column order; the relay's health probe stays out of product views."""
    return sorted(Project.objects.filter(active=True, is_health_probe=False), key=backend_order)


def reference_backend(projects: list[Project]) -> Project | None:
    """The reference among these projects, as Project.objects.reference() picks it: active, the
    first registered."""
    return min((p for p in projects if p.is_reference and p.active), key=lambda p: p.pk, default=None)


# --- loaders ------------------------------------------------------------------------------------


def jobs_for_commits(shas: list[str], project_ids: list[int], detail: bool = False) -> list:
    """Every attempt of every job of these backends on these commits, oldest first."""
    if not shas or not project_ids:
        return []
    rows = (
        jobs_counted(Figure.CELLS, shas).filter(project_id__in=project_ids).order_by("created_at", "run_attempt", "id")
    )
    if detail:
        return [DetailJob._make(values) for values in rows.values_list(*DETAIL_FIELDS)]
    return [SlimJob(*values, rank) for rank, values in enumerate(rows.values_list(*SLIM_FIELDS))]


def dispatch_states_for_commits(shas: list[str], project_ids: list[int]) -> dict[CellKey, list[str]]:
    if not shas or not project_ids:
        return {}
    # The page's deliveries first, then their dispatches by the (delivery, project) unique index:
    # a join on delivery.head_sha lets SQLite without statistics walk every dispatch of each
    # backend (1.2-3 s at a million jobs instead of 3-8 ms).
    deliveries = list(Delivery.objects.counted().filter(head_sha__in=shas).values_list("id", flat=True))
    rows = Dispatch.objects.filter(delivery_id__in=deliveries, project_id__in=project_ids).values_list(
        "head_sha", "project_id", "state"
    )
    states: dict[CellKey, list[str]] = {}
    for sha, project_id, state in rows:
        states.setdefault((sha, project_id), []).append(state)
    return states


def failed_tests_for_jobs(job_ids: list[int], with_messages: bool = False, name_contains: str = "") -> dict[int, list]:
    """Failed tests of the given attempts, by attempt id (one query); each row carries its
    job's `environment.device` as `env_device`, a device-word hint for relay.policy.testids.
    `name_contains`: only the rows whose reported name holds it (one test's method: the test
    page reads one test among a page of failing cells)."""
    fields = ["job_run_id", "name", "classname", "file", "hw_classification", "outcome", "env_device"] + (
        ["message", "truncated"] if with_messages else []
    )
    tests: dict[int, list] = {}
    # KT("job_run__environment__device") would read job_run as the JSON column (a bigint on PostgreSQL).
    device = KeyTextTransform("device", "job_run__environment")
    rows = FailedTest.objects.filter(job_run_id__in=job_ids).annotate(env_device=device)
    rows = rows.filter(name__contains=name_contains) if name_contains else rows
    for row in rows.values(*fields) if job_ids else []:
        tests.setdefault(row["job_run_id"], []).append(row)
    return tests


def reported_environment(reported: list[dict]) -> dict:
    """What a job's callback said of its environment, as failed_tests_for_jobs carries it."""
    return {"device": reported[0].get("env_device") or ""} if reported else {}


# --- cells --------------------------------------------------------------------------------------


@dataclass
class Cell(StateShown):
    """One backend on one commit: its jobs' verdicts (latest attempt each) combined."""

    sha: str
    project: Project
    state: State
    verdicts: list[JobVerdict] = field(default_factory=list)
    jobs: list = field(default_factory=list)
    """Every attempt of every job, as loaded."""

    @property
    def failing(self) -> bool:
        return self.state in FAILING

    @property
    def pending(self) -> bool:
        return (
            any(STATES[v.state].counts == Counts.PENDING for v in self.verdicts)
            or STATES[self.state].counts == Counts.PENDING
        )

    @property
    def has_result(self) -> bool:
        return STATES[self.state].counts in (Counts.PASS, Counts.FAIL, Counts.INFRA)

    def verdict_for(self, key: tuple[str, str]) -> JobVerdict | None:
        return next((v for v in self.verdicts if (v.job.workflow_name, v.job.job_name) == key), None)

    def attempts_of(self, verdict: JobVerdict) -> list:
        """The job's attempts, oldest first (the verdict policy's order)."""
        key = (verdict.job.workflow_name, verdict.job.job_name)
        return attempts_in_order(j for j in self.jobs if (j.workflow_name, j.job_name) == key)


def cells_for_commits(shas: list[str], projects: list[Project], detail: bool = False) -> dict[CellKey, Cell]:
    """Every (commit, backend) pair of the page, from two queries."""
    ids = [p.id for p in projects]
    jobs: dict[CellKey, list] = {}
    for job in jobs_for_commits(shas, ids, detail):
        jobs.setdefault((job.head_sha, job.project_id), []).append(job)
    dispatches = dispatch_states_for_commits(shas, ids)
    return {
        (sha, p.id): cell_for(sha, p, jobs.get((sha, p.id), []), dispatches.get((sha, p.id), []))
        for sha in shas
        for p in projects
    }


def cell_for(sha: str, project: Project, jobs: list, dispatch_states: list[str]) -> Cell:
    """L1 backends only ever show what happened to the dispatch; others show their jobs, or the
    dispatch while no callback has arrived."""
    if project.level == Level.L1:
        return Cell(sha, project, dispatch_cell_state(dispatch_states))
    verdicts = sorted(job_verdicts(jobs, probe=project.is_health_probe), key=_worst_first)
    if project.is_reference:  # a source, not a backend: only its results speak
        return Cell(sha, project, reference_state(v.state for v in verdicts), verdicts, jobs)
    state = cell_state(v.state for v in verdicts) if verdicts else awaiting_results_state(dispatch_states)
    return Cell(sha, project, state, verdicts, jobs)


def combined_state(verdicts: list[JobVerdict]) -> State:
    """The state of several jobs shown as one (a backend page's column of shards), by the same
    rule that combines a cell's jobs."""
    return cell_state(v.state for v in verdicts)


def _worst_first(verdict: JobVerdict) -> tuple:
    return (-STATES[verdict.state].rank, verdict.job.workflow_name, verdict.job.job_name)


def latest_failing_job_ids(cells) -> list[int]:
    return [v.job.id for cell in cells for v in cell.verdicts if v.state in FAILING]
