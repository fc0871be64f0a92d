"""The merge gate's verdict: per PR head, each L4 backend's state from its jobs' latest attempts,
and the overall `crcr/gate` state — the one verdict the check run (relay.checks.gate writes it),
GET /api/v1/prs/<number>/gate and the HUD's PR page (`gate_shown`) all give.

The policy lives in relay.policy.verdicts (`gate_backend`, `gate_overall`), with the job states the
HUD's cells use: only L4 backends count; the latest attempt of each job decides; failure,
cancelled, timed out and never started block; work without a result keeps the gate pending;
superseded work and backends that could not be asked count nowhere. A failing job blocks only as
the PR's verdict says (relay.results.blame, the one answer to "did this PR break it"): when one of
its failures is new in this PR, or it shows too little to tell (not run to a report, or a list
that is not complete); a job whose every failure is already failing on trunk, known or expected,
flaky or muted counts nowhere, and the reason names each failure and why.

**Why cancelled blocks.** A cancelled run tested nothing, and a backend must not be able to
turn its gate green by cancelling. The one exception is a job the relay cancelled itself
because a newer head was pushed (*superseded*): it is about a commit nobody can merge any more.
To unblock, re-run it (the check run's "Re-run" re-runs the run's failed and cancelled jobs)
or bypass the gate. Today's merge bot ignores cancelled and timed_out, and Dr.CI counts them as
failures; this gate settles on one rule for both."""

from dataclasses import dataclass

from django.db.models import Exists, OuterRef

from relay.policy.verdicts import (
    FAILING,
    PENDING,
    Gate,
    JobVerdict,
    gate_backend,
    gate_overall,
    job_key,
    job_key_label,
    job_verdicts,
)
from relay.stats import runkinds

from ..models import NEVER_STARTED_RUN_ID, Dispatch, JobRun, Level, Project, PullRequest
from .blame import BackendBlame, Finding, pr_blame
from .cells import registered_backends
from .heads import pr_head

GATE_NAME = "crcr/gate"
STATE_GLYPHS = {Gate.SUCCESS: "O", Gate.FAILURE: "X", Gate.PENDING: "?", Gate.SKIPPED: "↷", Gate.NONE: "~"}
"""The gate's states in the HUD's glyphs (colour is never the only signal)."""


# --- one backend on one head ----------------------------------------------------------------------


def gate_jobs(projects, head_sha: str):
    """Every attempt of every job of `projects` that counts for this head, as the pages count them
    (relay.stats.runkinds): a `ciflow/trunk` merge run's jobs are later attempts of the same
    jobs. A push run nobody started is left out: a backend that takes no push events must not
    fail the PR for it."""
    jobs = runkinds.jobs_counted(runkinds.Figure.GATE, [head_sha]).filter(project__in=projects)
    return jobs.exclude(dispatch__event_type="push", run_id=NEVER_STARTED_RUN_ID).prefetch_related("failed_tests")


def backend_verdicts(project: Project, pr_number: int, head_sha: str, jobs=None) -> list[JobVerdict]:
    """The health probe's L4 check is judged by the probe rule (relay.policy.verdicts, rule 7), as its
    cells are: an xfail job that failed passes, a plainly named one that failed blocks. `jobs`:
    the backend's `gate_jobs` when read already (`HeadLoad`)."""
    jobs = gate_jobs([project], head_sha) if jobs is None else jobs
    verdicts = job_verdicts(jobs, probe=project.is_health_probe)
    return sorted(verdicts, key=lambda v: (v.job.workflow_name, v.job.job_name))


def head_dispatches(project: Project, pr_number: int, head_sha: str):
    return _head_dispatches([project], pr_number, head_sha)


def _head_dispatches(projects, pr_number: int, head_sha: str):
    qs = Dispatch.objects.filter(
        project__in=projects, pr_number=pr_number, head_sha=head_sha, event_type="pull_request"
    )
    return qs.counted()


@dataclass
class HeadLoad:
    """Backends' counted jobs on one head, and their dispatches' states (each with whether a job
    answered it), read for all of them at once: the gate reads every L4 backend, and read backend
    by backend that was four queries and a compiled counted-runs filter each (a fan-out to 27 L4
    backends refreshed the gate 27 times: docs/performance.md, "Fan-out")."""

    jobs: dict[int, list[JobRun]]
    dispatches: dict[int, list[tuple[str, bool]]]

    def dispatch_facts(self, project: Project) -> tuple[set[str], bool]:
        """(the states of the backend's dispatches, whether one sent has no job yet)."""
        rows = self.dispatches.get(project.pk, [])
        return {state for state, _ in rows}, any(
            state == Dispatch.State.SENT and not answered for state, answered in rows
        )


def head_load(projects: list[Project], pr_number: int, head_sha: str) -> HeadLoad:
    jobs: dict[int, list[JobRun]] = {p.pk: [] for p in projects}
    for job in gate_jobs(projects, head_sha):
        jobs[job.project_id].append(job)
    answered = Exists(JobRun.objects.filter(dispatch=OuterRef("pk")))
    dispatches: dict[int, list[tuple[str, bool]]] = {}
    rows = _head_dispatches(projects, pr_number, head_sha).annotate(answered=answered)
    for project_id, state, is_answered in rows.values_list("project_id", "state", "answered"):
        dispatches.setdefault(project_id, []).append((state, is_answered))
    return HeadLoad(jobs, dispatches)


def backend_state(
    project: Project, pr_number: int, head_sha: str, pr_verdict: "_Verdicts | None" = None, load: HeadLoad | None = None
) -> tuple[Gate, str, list[JobVerdict], dict]:
    """(state, reason, job verdicts, excused) of one backend on one head, under relay.policy.verdicts,
    with the failing jobs the PR's verdict clears left out (`backend_jobs`), named in the reason.
    `load`: this head's `head_load`, when read for several backends at once."""
    load = load or head_load([project], pr_number, head_sha)
    verdicts, excused = backend_jobs(project, pr_number, head_sha, pr_verdict, load.jobs[project.pk])
    states, unanswered = load.dispatch_facts(project)
    state, reason = gate_backend(verdicts, states, unanswered, frozenset(excused))
    if excused:
        reason += "; not blocking: " + ", ".join(
            f"{job_key_label(job_key(v.job))} failed with {_excuse_names(excused[v.job.pk])}"
            for v in verdicts
            if v.job.pk in excused
        )
    return state, reason, verdicts, excused


def backend_jobs(
    project: Project, pr_number: int, head_sha: str, pr_verdict: "_Verdicts | None" = None, jobs=None
) -> tuple[list[JobVerdict], dict[int, list[Finding]]]:
    """(job verdicts, excused) of one backend on one head: its jobs' latest attempts, and the
    failing ones the PR's verdict (relay.results.blame; `pr_verdict` shares its load across
    backends) clears, job id → that job's findings. What the oncall pings ask; the gate's state
    adds the head's dispatches to it."""
    verdicts = backend_verdicts(project, pr_number, head_sha, jobs)
    failing = any(v.state in FAILING for v in verdicts)
    blame = (pr_verdict or _Verdicts(pr_number, head_sha)).of(project) if failing else None
    return verdicts, _cleared(verdicts, blame)


def _cleared(verdicts: list[JobVerdict], blame: BackendBlame | None) -> dict[int, list[Finding]]:
    """Failing jobs the PR's verdict clears: job id → their findings (none of which blocks)."""
    if blame is None:
        return {}
    return {
        v.job.pk: blame.jobs[job_key(v.job)] for v in verdicts if v.state in FAILING and blame.clears(job_key(v.job))
    }


def _excuse_names(findings: list[Finding]) -> str:
    """Each failure that does not block, with why: "test_x already failing on trunk"."""
    return ", ".join(f.text for f in findings)


class _Verdicts:
    """The PR's verdict for the head's L3 and L4 backends (the gate's and the oncall pings'),
    worked out once (and only when one fails)."""

    def __init__(self, pr_number: int, head: str):
        self.pr_number, self.head, self._by = pr_number, head, None

    def of(self, project: Project) -> BackendBlame | None:
        if self._by is None:
            projects = [p for p in registered_backends() if p.level in (Level.L3, Level.L4) or p.is_reference]
            pr = PullRequest.objects.filter(number=self.pr_number).first()
            self._by = {b.project.pk: b for b in pr_blame(self.head, pr, projects)}
        return self._by.get(project.pk)


# --- the gate -------------------------------------------------------------------------------------


def gate_verdict(pr_number: int, head_sha: str | None = None) -> dict:
    """The gate for a PR head (default: the head that counts, relay.results.heads.pr_head), as
    plain JSON-ready data."""
    head = (head_sha or pr_head(pr_number)).lower()
    blame = _Verdicts(pr_number, head)
    l4 = list(Project.objects.filter(level=Level.L4, active=True).order_by("full_name"))
    load = head_load(l4, pr_number, head)
    backends = [_backend_entry(p, pr_number, head, blame, load) for p in l4]
    backends = [b for b in backends if b["state"] != Gate.NONE]
    state = gate_overall(b["state"] for b in backends).value
    return {
        "pr_number": pr_number,
        "head_sha": head,
        "name": GATE_NAME,
        "state": state,
        "conclusion": None if state == Gate.PENDING else state,
        "blocking": [b["repo"] for b in backends if b["state"] in (Gate.FAILURE, Gate.PENDING)],
        "backends": backends,
        "title": gate_title(state, backends),
    }


def _backend_entry(project: Project, pr_number: int, head: str, pr_verdict: _Verdicts, load: HeadLoad) -> dict:
    state, reason, verdicts, excused = backend_state(project, pr_number, head, pr_verdict, load)
    jobs = [
        {
            "workflow": v.job.workflow_name,
            "job": v.job.job_name,
            "state": v.state.value,
            "attempts": v.attempts,
            "run_id": v.job.run_id,
            "url": v.job.workflow_url,
            "not_blocking": _excuse_names(excused[v.job.pk]) if v.job.pk in excused else "",
        }
        for v in verdicts
    ]
    return {"repo": project.full_name, "state": state.value, "reason": reason, "jobs": jobs}


def gate_title(state: str, backends: list[dict]) -> str:
    if not backends:
        return "No L4 backend runs on this PR"
    if state == "failure":
        return "Blocked: " + ", ".join(b["repo"] for b in backends if b["state"] == "failure") + " failed"
    if state == "pending":
        waiting = [b for b in backends if b["state"] == "pending"]
        return f"Waiting for {len(waiting)} of {len(backends)} L4 backend{'s' if len(backends) != 1 else ''}"
    return f"All {len(backends)} L4 backend{'s' if len(backends) != 1 else ''} passed"


# --- as the PR page shows it ---------------------------------------------------------------------


def gate_shown(pr_number: int, head_sha: str) -> dict:
    """gate_verdict for this head, with what the PR page shows beside it: per backend its glyph,
    the jobs that block, the failures that do not (and why), and what it waits for."""
    verdict = gate_verdict(pr_number, head_sha)
    backends = [_backend_shown(b) for b in verdict["backends"]]
    status = "in_progress" if verdict["state"] == Gate.PENDING else "completed"
    return {**verdict, "status": status, "l4_backends": len(backends), "backends": backends}


def _backend_shown(entry: dict) -> dict:
    jobs = entry["jobs"]
    failing = [
        {"job": job_key_label((j["workflow"], j["job"])), "state": j["state"], "not_blocking": j["not_blocking"]}
        for j in jobs
        if j["state"] in FAILING
    ]
    pending = [job_key_label((j["workflow"], j["job"])) for j in jobs if j["state"] in PENDING]
    if entry["state"] == Gate.PENDING and not pending:
        pending = [entry["reason"]]
    return {
        **entry,
        "project": entry["repo"],
        "glyph": STATE_GLYPHS.get(entry["state"], "~"),
        "failing_jobs": [f for f in failing if not f["not_blocking"]],
        "excused_jobs": [f for f in failing if f["not_blocking"]],
        "pending_jobs": pending,
    }
