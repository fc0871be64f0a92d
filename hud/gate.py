"""The `crcr/gate` verdict as the HUD shows it. The verdict itself comes from the relay
(relay.checks.gate), which writes the very same verdict to the check run and serves it at
GET /api/v1/prs/<number>/gate: one rule, everywhere. This module only shapes it for pages:

* **in_progress** while any L4 backend has dispatched work without a final result;
* **failure** when the latest attempt of any L4 job failed, timed out, never started or was
  cancelled (a job superseded by a newer head counts nowhere) — a known failure wins over work
  still running;
* **success** otherwise."""

from relay.checks import gate as relay_gate
from relay.models import UpstreamCommit

STATE_GLYPHS = {"success": "O", "failure": "X", "pending": "?", "skipped": "↷", "none": "~"}
PENDING_JOB_STATES = {"running"}


def gate_verdict(head_sha: str, pr_number: int | None = None) -> dict:
    if pr_number is None:
        pr_number = UpstreamCommit.objects.filter(sha=head_sha).values_list("pr_number", flat=True).first()
    verdict = relay_gate.gate_verdict(pr_number or 0, head_sha)
    state = "in_progress" if verdict["state"] == "pending" else verdict["state"]
    backends = [_backend(b) for b in verdict["backends"]]
    return {
        "head_sha": verdict["head_sha"], "pr_number": pr_number, "state": state,
        "status": "in_progress" if state == "in_progress" else "completed", "conclusion": verdict["conclusion"],
        "title": verdict["title"], "summary": relay_gate.gate_summary(verdict), "blocking": verdict["blocking"],
        "l4_backends": len(backends), "backends": backends,
    }  # fmt: skip


def _backend(entry: dict) -> dict:
    jobs = entry["jobs"]
    failing = [{"job": _label(j), "state": j["state"]} for j in jobs if j["state"] in relay_gate.FAILING]
    pending = [_label(j) for j in jobs if j["state"] in PENDING_JOB_STATES]
    if entry["state"] == "pending" and not pending:
        pending = [entry["reason"]]
    return {
        "project": entry["repo"], "state": entry["state"], "glyph": STATE_GLYPHS.get(entry["state"], "~"),
        "reason": entry["reason"], "failing_jobs": failing, "pending_jobs": pending,
    }  # fmt: skip


def _label(job: dict) -> str:
    return f"{job['workflow']} / {job['job']}" if job["job"] else job["workflow"]
