"""The `crcr/gate` verdict as the HUD's PR page shows it. The verdict itself comes from the
relay (relay.checks.gate, under relay.verdicts), which writes the very same verdict to the check
run and serves it at GET /api/v1/prs/<number>/gate: one rule and one vocabulary (success,
failure, pending) everywhere. This module only adds what a page shows beside it."""

from relay.checks import gate as relay_gate
from relay.verdicts import FAILING, PENDING, Gate, job_key_label

STATE_GLYPHS = {Gate.SUCCESS: "O", Gate.FAILURE: "X", Gate.PENDING: "?", Gate.SKIPPED: "↷", Gate.NONE: "~"}


def gate_shown(pr_number: int, head_sha: str) -> dict:
    """relay.checks.gate.gate_verdict for this head, with what the PR page shows beside it."""
    verdict = relay_gate.gate_verdict(pr_number, head_sha)
    backends = [_backend(b) for b in verdict["backends"]]
    return {
        **verdict,
        "status": "in_progress" if verdict["state"] == Gate.PENDING else "completed",
        "summary": relay_gate.gate_summary(verdict),
        "l4_backends": len(backends),
        "backends": backends,
    }


def _backend(entry: dict) -> dict:
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
