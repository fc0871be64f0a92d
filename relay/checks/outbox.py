"""Sending upstream writes through the outbox engine (relay.outbox). What is particular to them:
each kind's prepare function turns the claimed row into one GitHub call (a Plan) or nothing to
send (a Skip), at send time; a write waiting behind one to the same target goes as soon as that
one is recorded. Retries follow the CRCR_UPSTREAM_WRITE_* settings."""

import logging

from django.db.models import Prefetch

from relay.github import writes
from relay.github.markdown import upstream_body
from relay.github.writes import Plan, Skip
from relay.levels import demotion_sync

from ..github import client as github
from ..models import UpstreamWrite, UpstreamWriteAttempt
from ..outbox.engine import Outbox, Result, retry_countdown
from . import cause_issues, checkruns, oncall, reruns

logger = logging.getLogger(__name__)
Kind, State, Outcome = UpstreamWrite.Kind, UpstreamWrite.State, UpstreamWriteAttempt.Outcome
MAX_PAGES = 20


def write_prepare(write: UpstreamWrite) -> Plan | Skip:
    """The one place a write's kind picks the code that computes its body."""
    if write.kind in (Kind.CHECK_RUN_CREATE, Kind.CHECK_RUN_UPDATE):
        return checkruns.check_run_prepare(write)
    if write.kind in (Kind.COMMENT_CREATE, Kind.COMMENT_UPDATE):
        return oncall.comment_prepare(write)
    if write.kind == Kind.RERUN:
        return reruns.rerun_prepare(write)
    if write.kind == Kind.SUITE_RERUN:
        return reruns.suite_rerun_prepare(write)
    if write.kind == Kind.DEMOTION_SYNC:
        return demotion_sync.demotion_prepare(write)
    if write.kind == Kind.CAUSE_ISSUE:
        return cause_issues.cause_issue_prepare(write)
    raise LookupError(f"no prepare function for upstream write kind {write.kind!r}")


# --- send -----------------------------------------------------------------------------------------


class UpstreamWrites(Outbox):
    row_model, attempt_model, attempt_row_field = UpstreamWrite, UpstreamWriteAttempt, "write"
    settings_prefix = "CRCR_UPSTREAM_WRITE"
    final_states = {Outcome.SENT: State.SENT, Outcome.SKIPPED: State.SENT, Outcome.PERMANENT: State.FAILED}
    label = "upstream write"
    one_waiting_per_target = True  # upstream_write_one_unsent_per_target

    def attempt(self, write: UpstreamWrite) -> Result:
        return _attempt(write)

    task_name = writes.SEND_TASK

    def describe(self, write: UpstreamWrite) -> str:
        return f"{write.kind} {write.target_label}"

    def attempt_columns(self, result: Result) -> dict:
        return {"method": result.method, "path": result.path[:500]}

    def row_columns(self, result: Result) -> dict:
        return {"note": result.note[:300]}

    def committed(self, write: UpstreamWrite, state: str, retry_at) -> None:
        """A short retry rides on a countdown; a newer write to the same target that waited for
        this one to finish goes now."""
        countdown = retry_countdown(state, retry_at)
        if countdown is not None:
            writes.write_kick(write.pk, countdown=countdown)
        waiting = (
            UpstreamWrite.objects.filter(target_key=write.target_key, state=State.PENDING)
            .values_list("pk", flat=True)
            .first()
        )
        if waiting is not None:
            writes.write_kick(waiting)


WRITES = UpstreamWrites()


def write_claim(write_pk: int) -> UpstreamWrite | None:
    return WRITES.claim(write_pk)


def write_send(write_pk: int) -> str | None:
    """Claim, send and record one upstream write (Outbox.send); its new state, or None."""
    return WRITES.send(write_pk)


def writes_due(limit: int) -> list[int]:
    return WRITES.due(limit)


def _attempt(write: UpstreamWrite) -> Result:
    """Prepare the write for its kind and send it; unexpected errors are the
    engine's (recorded as transient)."""
    plan = None
    try:
        plan = write_prepare(write)
        if isinstance(plan, Skip):
            return Result(Outcome.SKIPPED, note=plan.note)
        response = _execute(plan)
    except github.GitHubError as exc:
        return _failure(plan, exc)
    note = plan.on_sent(response) if plan.on_sent else ""
    return Result(Outcome.SENT, response.status, method=plan.method, path=plan.path, note=note or "")


def _failure(plan: Plan | None, exc: github.GitHubError) -> Result:
    where = {"method": plan.method, "path": plan.path} if plan else {}
    benign = plan.on_error(exc) if plan and plan.on_error else None
    if benign:
        return Result(Outcome.SENT, exc.status, note=benign, **where)
    outcome = Outcome.TRANSIENT if isinstance(exc, github.TransientGitHubError) else Outcome.PERMANENT
    return Result(outcome, exc.status, str(exc), exc.retry_after, **where)


def _execute(plan: Plan) -> github.Response:
    if plan.paginate_key:
        return github.paginate_as_installation(
            plan.installation_id, plan.path, key=plan.paginate_key, max_pages=MAX_PAGES
        )
    body = upstream_body(plan.body) if plan.body is not None else None
    return github.as_installation(plan.installation_id, plan.method, plan.path, json=body)


# --- sweep and read -------------------------------------------------------------------------------


def writes_recent(limit: int = 50) -> list[UpstreamWrite]:
    """The newest upstream writes with their attempts, for /relay/deliveries."""
    attempts = Prefetch("attempt_log", queryset=UpstreamWriteAttempt.objects.order_by("number"))
    return list(UpstreamWrite.objects.prefetch_related(attempts).order_by("-created_at", "-id")[:limit])
