"""The `crcr/gate` verdict for a PR head, computed from the status policy over the latest attempts
of L4 (merge-blocking) backends' jobs on that head:

* **in_progress** while any L4 backend has dispatched work without a final result (a job still
  running or queued, or a dispatch sent or pending with no callback yet);
* **failure** when the latest attempt of any L4 job failed, timed out (or never started) or was
  cancelled; superseded work blocks nothing, and a flaky pass is a pass;
* **success** otherwise, including when no L4 backend has work on the head.

Shaped like a check run (status, conclusion, title, summary) so the gate's builder and the pages
can share it."""

from relay.models import Level

from .selectors_commit import Cell, cells_for_commits, registered_backends
from .status import FAILING, STATES, Counts, State

WAITING_STATES = {State.QUEUED, State.DISPATCH_PENDING}


def gate_verdict(head_sha: str) -> dict:
    projects = [p for p in registered_backends() if p.level == Level.L4]
    cells = cells_for_commits([head_sha], projects)
    backends = [_backend_verdict(cells[(head_sha, p.id)]) for p in projects]
    pending = [b for b in backends if b["pending_jobs"]]
    failing = [b for b in backends if b["failing_jobs"]]
    state = "in_progress" if pending else "failure" if failing else "success"
    return {
        "head_sha": head_sha,
        "state": state,
        "status": "in_progress" if pending else "completed",
        "conclusion": None if pending else state,
        "title": _title(state, backends, pending, failing),
        "summary": _summary(backends),
        "l4_backends": len(projects),
        "backends": backends,
    }


def _backend_verdict(cell: Cell) -> dict:
    pending = [_name(v.job) for v in cell.verdicts if STATES[v.state].counts == Counts.PENDING]
    if not cell.verdicts and cell.state in WAITING_STATES:
        pending = ["(dispatched, no result yet)"]
    failing = [{"job": _name(v.job), "state": v.state.value} for v in cell.verdicts if v.state in FAILING]
    return {
        "project": cell.project.full_name, "project_id": cell.project.id, "state": cell.state.value,
        "glyph": cell.glyph, "pending_jobs": pending, "failing_jobs": failing,
    }


def _name(job) -> str:
    return f"{job.workflow_name} / {job.job_name}" if job.job_name else job.workflow_name


def _title(state: str, backends, pending, failing) -> str:
    if state == "in_progress":
        extra = f"; {len(failing)} already failing" if failing else ""
        return f"Waiting for {len(pending)} of {len(backends)} L4 backend{'s' if len(backends) != 1 else ''}{extra}"
    if state == "failure":
        return f"{len(failing)} of {len(backends)} L4 backend{'s' if len(backends) != 1 else ''} failing"
    return f"All {len(backends)} L4 backends passed" if backends else "No L4 backends registered"


def _summary(backends) -> str:
    lines = []
    for backend in backends:
        failed = ", ".join(f"{f['job']} ({f['state']})" for f in backend["failing_jobs"])
        waiting = ", ".join(backend["pending_jobs"])
        detail = "; ".join(part for part in (failed and f"failing: {failed}", waiting and f"waiting: {waiting}") if part)
        lines.append(f"- {backend['project']}: {detail or STATES[State(backend['state'])].label}")
    return "\n".join(lines)
