"""The merge gate: one check run, `crcr/gate`, per PR head SHA, summarising the L4 backends.
Branch protection can require this one stable name; bots read the same verdict from
`gate_verdict()` (served at GET /api/v1/prs/<number>/gate).

The policy (the same rules as the HUD's status policy; `relay` cannot import `hud`):

1. Only L4 backends count. For each, the **latest attempt of each job** on the head SHA decides;
   an earlier failed attempt that a re-run turned green does not block.
2. **failure** when the latest attempt of any L4 job failed, timed out, never started, or was
   cancelled. **in progress** while any L4 backend has dispatched work without a final result
   (dispatch not yet sent, sent but no job reported yet, or a job still running); the results
   sweeper bounds this, because a job silent past its timeout ends `timed_out` and a dispatch no
   run answered ends "never started", and both block. A known failure wins over work still
   running, so the red shows as soon as it is certain. **success** otherwise.
3. **Cancelled blocks.** A job whose latest attempt ended `cancelled` blocks the merge like a
   failure: a cancelled run tested nothing, and a backend must not be able to turn its gate green
   by cancelling. The one exception is a job the relay cancelled itself because a newer head was
   pushed (*superseded*): it is about a commit nobody can merge any more, so it counts nowhere.
   To unblock, re-run it (the check run's "Re-run" re-runs the run's failed and cancelled jobs)
   or bypass the gate. Today's merge bot ignores cancelled and timed_out, and Dr.CI counts them
   as failures; this gate settles on one rule for both.
4. Backends that could not be asked (the App is not installed, or the dispatch failed for good)
   are listed but do not block: the PR author cannot fix them, and the relay page shows them.
   Nor does a backend whose work on this head was all superseded by a newer head.
"""

from dataclasses import dataclass

from django.conf import settings
from django.db.models import Exists, OuterRef

from ..models import Dispatch, JobRun, Level, Project
from ..results_sweep import latest_heads
from .markdown import md_code

GATE_NAME = "crcr/gate"
FAILING = {"failure", "cancelled", "timed_out", "never_started"}
PASSING = {"success", "neutral", "skipped"}
CONCLUSION_STATES = {
    "success": "success", "failure": "failure", "cancelled": "cancelled", "timed_out": "timed_out",
    "neutral": "neutral", "skipped": "skipped", "action_required": "failure", "stale": "timed_out",
}  # fmt: skip
"""A completed attempt's conclusion → its state (as hud.status.conclusion_state)."""
GLYPHS = {"success": "✅", "failure": "❌", "pending": "⏳", "skipped": "⚪"}


# --- one job, one backend -------------------------------------------------------------------------


def attempt_state(job: JobRun) -> str:
    """A single attempt on its own."""
    if job.status != JobRun.Status.COMPLETED:
        return "running"
    if job.ended_by == JobRun.EndedBy.SUPERSEDED:
        return "superseded"
    if job.ended_by == JobRun.EndedBy.NEVER_STARTED:
        return "never_started"
    return CONCLUSION_STATES.get(job.conclusion, "failure")


def attempt_order(job: JobRun):
    return (job.created_at, job.run_attempt, job.pk)


@dataclass(frozen=True)
class JobVerdict:
    job: JobRun
    state: str
    attempts: int


def job_verdicts(jobs) -> list[JobVerdict]:
    """One verdict per (workflow, job) from all its attempts: the latest decides."""
    grouped: dict[tuple[str, str], list[JobRun]] = {}
    for job in jobs:
        grouped.setdefault((job.workflow_name, job.job_name), []).append(job)
    verdicts = []
    for attempts in grouped.values():
        latest = max(attempts, key=attempt_order)
        verdicts.append(JobVerdict(latest, attempt_state(latest), len(attempts)))
    return sorted(verdicts, key=lambda v: (v.job.workflow_name, v.job.job_name))


def head_jobs(project: Project, pr_number: int, head_sha: str):
    """Every attempt of every job of `project` on this PR head (not the PR's closing dispatch)."""
    jobs = JobRun.objects.filter(project=project, pr_number=pr_number, head_sha=head_sha).exclude(dispatch__delivery__action="closed")
    return jobs.prefetch_related("failed_tests")


def backend_verdicts(project: Project, pr_number: int, head_sha: str) -> list[JobVerdict]:
    return job_verdicts(head_jobs(project, pr_number, head_sha))


def head_dispatches(project: Project, pr_number: int, head_sha: str):
    qs = Dispatch.objects.filter(project=project, pr_number=pr_number, head_sha=head_sha, event_type="pull_request")
    return qs.exclude(delivery__action="closed")


def backend_state(project: Project, pr_number: int, head_sha: str) -> tuple[str, str, list[JobVerdict]]:
    """(state, reason, job verdicts) of one backend on one head; state is success / failure /
    pending / skipped (counts nowhere) / none (nothing was dispatched)."""
    verdicts = backend_verdicts(project, pr_number, head_sha)
    counted = [v for v in verdicts if v.state != "superseded"]
    if verdicts and not counted:
        return "skipped", "superseded by a newer head", verdicts
    state, reason = _decide(counted, project, pr_number, head_sha)
    return state, reason, verdicts


def _decide(counted: list[JobVerdict], project: Project, pr_number: int, head_sha: str) -> tuple[str, str]:
    failing = [v for v in counted if v.state in FAILING]
    if failing:
        return "failure", ", ".join(_job_label(v) + f" {v.state.replace('_', ' ')}" for v in failing)
    if any(v.state == "running" for v in counted):
        return "pending", "jobs running"
    dispatches = head_dispatches(project, pr_number, head_sha)
    unanswered = dispatches.filter(state=Dispatch.State.SENT).exclude(Exists(JobRun.objects.filter(dispatch=OuterRef("pk"))))
    return _dispatch_state(set(dispatches.values_list("state", flat=True)), counted, unanswered.exists())


def _dispatch_state(dispatch_states: set[str], counted: list[JobVerdict], unanswered: bool) -> tuple[str, str]:
    if dispatch_states & {"pending", "sending", "retrying"}:
        return "pending", "dispatch not sent yet"
    if unanswered:
        # e.g. a reopen re-dispatched the same head: its run (or the sweeper's never-started) decides.
        return "pending", "dispatched; no job has reported yet"
    if counted:
        return "success", "all jobs passed"
    if dispatch_states & {"not_installed", "failed", "superseded"}:
        return "skipped", "not dispatched (" + ", ".join(sorted(dispatch_states)).replace("_", " ") + ")"
    return "none", "not dispatched for this head"


def _job_label(verdict: JobVerdict) -> str:
    job = verdict.job
    return f"{job.workflow_name}/{job.job_name}" if job.job_name else job.workflow_name


# --- the gate -------------------------------------------------------------------------------------


def pr_head(pr_number: int) -> str:
    """The newest head the relay saw for the PR, else the newest it dispatched for."""
    head = latest_heads([pr_number]).get(pr_number)
    if head:
        return head
    dispatch = Dispatch.objects.filter(pr_number=pr_number, event_type="pull_request").exclude(head_sha="").order_by("-created_at", "-id").first()
    return dispatch.head_sha if dispatch else ""


def gate_verdict(pr_number: int, head_sha: str | None = None) -> dict:
    """The gate for a PR head (default: its latest head), as plain JSON-ready data."""
    head = (head_sha or pr_head(pr_number)).lower()
    backends = [_backend_entry(p, pr_number, head) for p in Project.objects.filter(level=Level.L4, active=True).order_by("full_name")]
    backends = [b for b in backends if b["state"] != "none"]
    states = {b["state"] for b in backends}
    state = "failure" if "failure" in states else "pending" if "pending" in states else "success"
    return {
        "pr_number": pr_number, "head_sha": head, "name": GATE_NAME, "state": state,
        "conclusion": None if state == "pending" else state,
        "blocking": [b["repo"] for b in backends if b["state"] in ("failure", "pending")],
        "backends": backends, "title": gate_title(state, backends),
    }  # fmt: skip


def _backend_entry(project: Project, pr_number: int, head: str) -> dict:
    state, reason, verdicts = backend_state(project, pr_number, head)
    jobs = [{"workflow": v.job.workflow_name, "job": v.job.job_name, "state": v.state, "attempts": v.attempts,
             "run_id": v.job.run_id, "url": v.job.workflow_url} for v in verdicts]  # fmt: skip
    return {"repo": project.full_name, "state": state, "reason": reason, "jobs": jobs}


def gate_title(state: str, backends: list[dict]) -> str:
    if not backends:
        return "No L4 backend runs on this PR"
    if state == "failure":
        return "Blocked: " + ", ".join(b["repo"] for b in backends if b["state"] == "failure") + " failed"
    if state == "pending":
        waiting = [b for b in backends if b["state"] == "pending"]
        return f"Waiting for {len(waiting)} of {len(backends)} L4 backend{'s' if len(backends) != 1 else ''}"
    return f"All {len(backends)} L4 backend{'s' if len(backends) != 1 else ''} passed"


def gate_summary(verdict: dict) -> str:
    """Markdown: one row per L4 backend, then the policy in one line."""
    lines = [f"Merge gate for `{verdict['head_sha'][:12]}`: **{verdict['state']}**.", ""]
    if verdict["backends"]:
        lines += ["| Backend | Result | Jobs | Why |", "|---|---|---|---|"]
        for b in verdict["backends"]:
            counts = _job_counts(b["jobs"])
            lines.append(f"| {_md(b['repo'])} | {GLYPHS.get(b['state'], '')} {b['state']} | {counts} | {_md(b['reason'])} |")
    lines += ["", "The latest attempt of each L4 job decides. Failure, timed out, never started and cancelled block "
              "(a job cancelled because a newer head was pushed counts nowhere); work still running keeps the gate in progress."]
    if settings.CRCR_PUBLIC_URL:
        lines += ["", f"Details: {settings.CRCR_PUBLIC_URL}/pr/{verdict['pr_number']}"]
    return "\n".join(lines)[:65535]


def _job_counts(jobs: list[dict]) -> str:
    counted = [j for j in jobs if j["state"] != "superseded"]
    passed = sum(1 for j in counted if j["state"] in PASSING)
    return f"{passed}/{len(counted)} passed" if counted else "—"


def _md(text: str) -> str:
    return md_code(text, 300, table=True)


def gate_body(pr_number: int, head_sha: str) -> dict:
    """The check run body (without name and head_sha) for the gate of this head."""
    verdict = gate_verdict(pr_number, head_sha)
    body = {
        "status": "in_progress" if verdict["state"] == "pending" else "completed",
        "external_id": f"gate:{pr_number}", "details_url": f"{settings.CRCR_PUBLIC_URL}/pr/{pr_number}",
        "output": {"title": verdict["title"][:255], "summary": gate_summary(verdict)},
    }  # fmt: skip
    if verdict["conclusion"]:
        body["conclusion"] = verdict["conclusion"]
    return body

