"""Upstream writes (check runs, comments, re-runs) through the outbox engine (relay.outbox): one
row per intended write, at most one unsent and one sending per target. What is particular to
them: the body of a write is computed by its kind's handler at send time, from the rows as they
are then, so a retry sends the latest truth and a newer change supersedes an unsent older write;
a write waiting behind one to the same target goes as soon as that one is recorded. Retries
follow the CRCR_UPSTREAM_WRITE_* settings."""

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import Prefetch
from django.utils import timezone
from django.utils.module_loading import import_string

from .. import github
from ..models_checks import UpstreamWrite, UpstreamWriteAttempt
from ..outbox.engine import Outbox, Result, retry_countdown

logger = logging.getLogger(__name__)
Kind, State, Outcome = UpstreamWrite.Kind, UpstreamWrite.State, UpstreamWriteAttempt.Outcome

HANDLERS = {
    Kind.CHECK_RUN_CREATE: "relay.checks.checkruns.check_run_prepare",
    Kind.CHECK_RUN_UPDATE: "relay.checks.checkruns.check_run_prepare",
    Kind.COMMENT_CREATE: "relay.checks.oncall.comment_prepare",
    Kind.COMMENT_UPDATE: "relay.checks.oncall.comment_prepare",
    Kind.RERUN: "relay.checks.reruns.rerun_prepare",
    Kind.SUITE_RERUN: "relay.checks.reruns.suite_rerun_prepare",
}
"""kind → the function that turns a claimed write into a Plan (or a Skip), at send time."""
MAX_PAGES = 20


@dataclass
class Plan:
    """One GitHub call. `on_sent` stores what came back (ids) and returns a note; `on_error` sees
    an error answer first and returns a note when GitHub meant it as a normal answer (a re-run
    that is "already running")."""

    method: str
    path: str
    installation_id: int
    body: dict | None = None
    paginate_key: str | None = None
    on_sent: Callable[[github.Response], str] | None = None
    on_error: Callable[[github.GitHubError], str | None] | None = None


@dataclass(frozen=True)
class Skip:
    """Nothing to send (unchanged, or moot by now)."""

    note: str


def body_digest(body: object) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def tried_before(write: UpstreamWrite) -> bool:
    """Whether an earlier try at this target failed in a way that may still have landed (a
    create whose answer was lost): handlers then look for it before creating again."""
    return UpstreamWriteAttempt.objects.filter(write__target_key=write.target_key, outcome=Outcome.TRANSIENT).exists()


# --- enqueue --------------------------------------------------------------------------------------


def write_in_flight(target_key: str) -> bool:
    """Whether a write to this target is unsent or being sent (its body is not on GitHub yet)."""
    return UpstreamWrite.objects.filter(target_key=target_key, state__in=[*UpstreamWrite.UNSENT_STATES, State.SENDING]).exists()


def write_enqueue(kind: str, target_key: str, label: str = "", **targets) -> UpstreamWrite:
    """Intend a write; the kick runs after commit. An unsent write for the same target is
    superseded (its backoff kept, so a rate limit is still honoured)."""
    with transaction.atomic():
        older = UpstreamWrite.objects.filter(target_key=target_key, state__in=UpstreamWrite.UNSENT_STATES).first()
        due = timezone.now()
        if older is not None and UpstreamWrite.objects.filter(pk=older.pk, state__in=UpstreamWrite.UNSENT_STATES).update(state=State.SUPERSEDED):
            due = max(due, older.next_attempt_at) if older.state == State.RETRYING else due
        write = _create_unsent(kind, target_key, label[:600], due, targets)
    transaction.on_commit(lambda: write_kick(write.pk))
    return write


def _create_unsent(kind: str, target_key: str, label: str, due, targets: dict) -> UpstreamWrite:
    try:
        with transaction.atomic():
            return UpstreamWrite.objects.create(kind=kind, target_key=target_key, target_label=label, next_attempt_at=due, **targets)
    except IntegrityError:
        # A concurrent enqueue made the unsent row first; it will compute the same latest truth.
        return UpstreamWrite.objects.get(target_key=target_key, state__in=UpstreamWrite.UNSENT_STATES)


def write_kick(write_pk: int, countdown: float = 0.0) -> None:
    WRITES.kick(write_pk, countdown)


# --- send -----------------------------------------------------------------------------------------


class UpstreamWrites(Outbox):
    row_model, attempt_model, attempt_row_field = UpstreamWrite, UpstreamWriteAttempt, "write"
    settings_prefix = "CRCR_UPSTREAM_WRITE"
    final_states = {Outcome.SENT: State.SENT, Outcome.SKIPPED: State.SENT, Outcome.PERMANENT: State.FAILED}
    label = "upstream write"

    def attempt(self, write: UpstreamWrite) -> Result:
        return _attempt(write)

    def task(self):
        from .tasks import upstream_write_send

        return upstream_write_send

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
            write_kick(write.pk, countdown=countdown)
        waiting = UpstreamWrite.objects.filter(target_key=write.target_key, state=State.PENDING).values_list("pk", flat=True).first()
        if waiting is not None:
            write_kick(waiting)


WRITES = UpstreamWrites()
write_claim = WRITES.claim
write_send = WRITES.send
write_record = WRITES.record
writes_due = WRITES.due


def _attempt(write: UpstreamWrite) -> Result:
    """Prepare the write with its kind's handler and send it; unexpected errors are the
    engine's (recorded as transient)."""
    plan = None
    try:
        plan = import_string(HANDLERS[write.kind])(write)
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
        return github.paginate_as_installation(plan.installation_id, plan.path, key=plan.paginate_key, max_pages=MAX_PAGES)
    return github.as_installation(plan.installation_id, plan.method, plan.path, json=plan.body)


# --- sweep and read -------------------------------------------------------------------------------


def writes_recent(limit: int = 50) -> list[UpstreamWrite]:
    """The newest upstream writes with their attempts, for /relay/deliveries."""
    attempts = Prefetch("attempt_log", queryset=UpstreamWriteAttempt.objects.order_by("number"))
    return list(UpstreamWrite.objects.prefetch_related(attempts).order_by("-created_at", "-id")[:limit])
