"""The merge gate's verdict: per PR head, each L4 backend's state from its jobs' latest attempts,
and the overall `crcr/gate` state — the one verdict the check run (relay.checks.gate writes it),
GET /api/v1/prs/<number>/gate and the HUD's PR page (`gate_shown`) all give.

The policy lives in relay.verdicts (`gate_backend`, `gate_overall`), with the job states the
HUD's cells use: only L4 backends count; the latest attempt of each job decides; failure,
cancelled, timed out and never started block; work without a result keeps the gate pending;
superseded work and backends that could not be asked count nowhere. A failure an admin marked as
not blocking (a known issue) or a muted test counts nowhere, and says so.

**Why cancelled blocks.** A cancelled run tested nothing, and a backend must not be able to
turn its gate green by cancelling. The one exception is a job the relay cancelled itself
because a newer head was pushed (*superseded*): it is about a commit nobody can merge any more.
To unblock, re-run it (the check run's "Re-run" re-runs the run's failed and cancelled jobs)
or bypass the gate. Today's merge bot ignores cancelled and timed_out, and Dr.CI counts them as
failures; this gate settles on one rule for both."""

from django.db.models import Exists, OuterRef

from .. import runkinds
from ..models import NEVER_STARTED_RUN_ID, Dispatch, JobRun, Level, Project
from ..triage.issues import not_blocking
from ..triage.mutes import Muted
from ..verdicts import FAILING, PENDING, Gate, JobVerdict, gate_backend, gate_overall, job_key_label, job_verdicts
from .heads import pr_head

GATE_NAME = "crcr/gate"
STATE_GLYPHS = {Gate.SUCCESS: "O", Gate.FAILURE: "X", Gate.PENDING: "?", Gate.SKIPPED: "↷", Gate.NONE: "~"}
"""The gate's states in the HUD's glyphs (colour is never the only signal)."""


# --- one backend on one head ----------------------------------------------------------------------


def jobs_counted(project: Project, head_sha: str):
    """Every attempt of every job of `project` that counts for this head, as the pages count them
    (relay.runkinds): a `ciflow/trunk` merge run's jobs are later attempts of the same
    jobs. A push run nobody started is left out: a backend that takes no push events must not
    fail the PR for it."""
    jobs = runkinds.jobs_counted(runkinds.Figure.GATE, [head_sha]).filter(project=project)
    return jobs.exclude(dispatch__event_type="push", run_id=NEVER_STARTED_RUN_ID).prefetch_related("failed_tests")


def backend_verdicts(project: Project, pr_number: int, head_sha: str) -> list[JobVerdict]:
    """The health probe's L4 check is judged by the probe rule (relay.verdicts, rule 7), as its
    cells are: an xfail job that failed passes, a plainly named one that failed blocks."""
    verdicts = job_verdicts(jobs_counted(project, head_sha), probe=project.is_health_probe)
    return sorted(verdicts, key=lambda v: (v.job.workflow_name, v.job.job_name))


def head_dispatches(project: Project, pr_number: int, head_sha: str):
    qs = Dispatch.objects.filter(project=project, pr_number=pr_number, head_sha=head_sha, event_type="pull_request")
    return qs.counted()


def backend_state(project: Project, pr_number: int, head_sha: str) -> tuple[Gate, str, list[JobVerdict], dict]:
    """(state, reason, job verdicts, excused) of one backend on one head, under relay.verdicts. A
    failing job whose failures all match known issues an admin marked as not blocking, or tests the
    backend muted, counts nowhere, and the reason says so; `excused` is job id → those excuses."""
    verdicts = backend_verdicts(project, pr_number, head_sha)
    dispatches = head_dispatches(project, pr_number, head_sha)
    unanswered = dispatches.filter(state=Dispatch.State.SENT).exclude(
        Exists(JobRun.objects.filter(dispatch=OuterRef("pk")))
    )
    states = set(dispatches.values_list("state", flat=True))
    excused = not_blocking(verdicts, project.pk)
    state, reason = gate_backend(verdicts, states, unanswered.exists(), frozenset(excused))
    if excused:
        reason += "; not blocking: " + ", ".join(
            _excused_text(v, excused[v.job.pk]) for v in verdicts if v.job.pk in excused
        )
    return state, reason, verdicts, excused


def _excused_text(verdict: JobVerdict, excuses) -> str:
    return f"{verdict.job.workflow_name} / {verdict.job.job_name} failed with {_excuse_names(excuses)}"


def _excuse_names(excuses) -> str:
    """Known issues marked not blocking, and mutes, as the gate names them."""
    return ", ".join(
        f"{e.mute.identity.identity} {e.label}" if isinstance(e, Muted) else f"known issue #{e.pk} {e.title}"
        for e in excuses
    )


# --- the gate -------------------------------------------------------------------------------------


def gate_verdict(pr_number: int, head_sha: str | None = None) -> dict:
    """The gate for a PR head (default: the head that counts, relay.results.heads.pr_head), as
    plain JSON-ready data."""
    head = (head_sha or pr_head(pr_number)).lower()
    backends = [
        _backend_entry(p, pr_number, head)
        for p in Project.objects.filter(level=Level.L4, active=True).order_by("full_name")
    ]
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


def _backend_entry(project: Project, pr_number: int, head: str) -> dict:
    state, reason, verdicts, excused = backend_state(project, pr_number, head)
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
