"""The outbox for everything the relay writes upstream, mirroring the dispatch machinery: one row
per intended write, claimed with a conditional UPDATE, sent, and recorded with its attempt row in
one transaction. Transient failures back off (capped, jittered, GitHub's hints honoured, stored on
the row); permanent ones stop and stay visible; a beat sweeper re-sends what is due.

The body of a write is computed by its kind's handler at send time, from the rows as they are
then: a retry sends the latest truth, and a newer change supersedes an unsent older write."""

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Callable

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Prefetch, Q
from django.utils import timezone
from django.utils.module_loading import import_string

from .. import github
from ..dispatching import retry_delay
from ..models_checks import UpstreamWrite, UpstreamWriteAttempt

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
KICK_COUNTDOWN_LIMIT_SECONDS = 30
"""Short retries ride on a countdown; longer ones wait for the sweeper (no long ETAs on Redis)."""
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


@dataclass(frozen=True)
class Result:
    outcome: str
    method: str = ""
    path: str = ""
    status_code: int | None = None
    error: str = ""
    note: str = ""
    retry_after: float | None = None


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
    """Best effort: if the broker is down the row stays due and the sweeper sends it."""
    from .tasks import upstream_write_send

    try:
        upstream_write_send.apply_async(args=[write_pk], countdown=countdown)
    except Exception as exc:  # noqa: BLE001 - any broker failure; the sweeper is the fallback
        logger.warning("could not enqueue upstream write %s (sweeper will send): %s", write_pk, exc)


# --- send -----------------------------------------------------------------------------------------


def write_claim(write_pk: int) -> UpstreamWrite | None:
    """Take the row if it is due (or its sender's lease ran out) and no other write to the same
    target is being sent. Exactly one caller wins."""
    now = timezone.now()
    due = Q(state__in=UpstreamWrite.UNSENT_STATES, next_attempt_at__lte=now) | Q(state=State.SENDING, lease_expires_at__lt=now)
    lease = now + timedelta(seconds=settings.CRCR_DISPATCH_LEASE_SECONDS)
    try:
        with transaction.atomic():
            claimed = UpstreamWrite.objects.filter(due, pk=write_pk).update(state=State.SENDING, lease_expires_at=lease)
    except IntegrityError:
        return None  # another write to this target is in flight; the next kick or sweep sends this one
    if claimed != 1:
        return None
    return UpstreamWrite.objects.get(pk=write_pk)


def write_send(write_pk: int) -> str | None:
    """Claim, send, record. Returns the row's new state, or None when there was nothing to do."""
    write = write_claim(write_pk)
    if write is None:
        return None
    started, started_at = time.monotonic(), timezone.now()
    result = _attempt(write)
    return write_record(write, result, started_at, int((time.monotonic() - started) * 1000))


def _attempt(write: UpstreamWrite) -> Result:
    plan = None
    try:
        plan = import_string(HANDLERS[write.kind])(write)
        if isinstance(plan, Skip):
            return Result(Outcome.SKIPPED, note=plan.note)
        response = _execute(plan)
    except github.GitHubError as exc:
        return _failure(plan, exc)
    except Exception as exc:  # noqa: BLE001 - e.g. the cache or database blinked, or a bug
        # Recorded and retried with backoff like any transient failure, so it ends visibly (failed
        # after the last attempt) instead of looping silently on the lease.
        logger.exception("upstream write %s (%s) could not be prepared or sent", write.pk, write.kind)
        return Result(Outcome.TRANSIENT, error=f"{exc.__class__.__name__}: {exc}")
    note = plan.on_sent(response) if plan.on_sent else ""
    return Result(Outcome.SENT, plan.method, plan.path, response.status, note=note or "")


def _failure(plan: Plan | None, exc: github.GitHubError) -> Result:
    where = {"method": plan.method, "path": plan.path} if plan else {}
    benign = plan.on_error(exc) if plan and plan.on_error else None
    if benign:
        return Result(Outcome.SENT, status_code=exc.status, note=benign, **where)
    outcome = Outcome.TRANSIENT if isinstance(exc, github.TransientGitHubError) else Outcome.PERMANENT
    return Result(outcome, status_code=exc.status, error=str(exc), retry_after=exc.retry_after, **where)


def _execute(plan: Plan) -> github.Response:
    if not plan.paginate_key:
        return github.as_installation(plan.installation_id, plan.method, plan.path, json=plan.body)
    items, url, response = [], plan.path, None
    for _ in range(MAX_PAGES):
        response = github.as_installation(plan.installation_id, "GET", url)
        items.extend(response.json.get(plan.paginate_key, []) if isinstance(response.json, dict) else response.json)
        url = github._next_link(response.headers.get("link", ""))
        if url is None:
            break
    return github.Response(response.status, items, response.headers)


def write_record(write: UpstreamWrite, result: Result, started_at, duration_ms: int) -> str:
    number = write.attempts + 1
    state, retry_at = _next_state(write, result, number)
    with transaction.atomic():
        UpstreamWriteAttempt.objects.create(
            write=write, number=number, started_at=started_at, duration_ms=duration_ms, method=result.method,
            path=result.path[:500], status_code=result.status_code, outcome=result.outcome, error=result.error[:2000], retry_at=retry_at,
        )
        fields = {"state": state, "attempts": number, "lease_expires_at": None, "last_error": result.error[:2000], "note": result.note[:300]}
        if retry_at:
            fields["next_attempt_at"] = retry_at
        if state == State.SENT:
            fields["sent_at"] = timezone.now()
        UpstreamWrite.objects.filter(pk=write.pk, state=State.SENDING).update(**fields)
        transaction.on_commit(lambda: _kick_after(write, state, retry_at))
    logger.info("upstream write %s %s (%s): %s, attempt %s", write.pk, write.kind, write.target_label, state, number)
    return state


def _next_state(write: UpstreamWrite, result: Result, number: int):
    if result.outcome in (Outcome.SENT, Outcome.SKIPPED):
        return State.SENT, None
    if result.outcome == Outcome.PERMANENT or _exhausted(write, number):
        return State.FAILED, None
    return State.RETRYING, timezone.now() + timedelta(seconds=retry_delay(number, result.retry_after))


def _exhausted(write: UpstreamWrite, number: int) -> bool:
    too_old = timezone.now() - write.created_at > timedelta(hours=settings.CRCR_DISPATCH_MAX_AGE_HOURS)
    return number >= settings.CRCR_DISPATCH_MAX_ATTEMPTS or too_old


def _kick_after(write: UpstreamWrite, state: str, retry_at) -> None:
    """A short retry rides on a countdown; a newer write to the same target that waited for this
    one to finish goes now."""
    if state == State.RETRYING and (retry_at - timezone.now()).total_seconds() <= KICK_COUNTDOWN_LIMIT_SECONDS:
        write_kick(write.pk, countdown=max(0.0, (retry_at - timezone.now()).total_seconds()))
    waiting = UpstreamWrite.objects.filter(target_key=write.target_key, state=State.PENDING).values_list("pk", flat=True).first()
    if waiting is not None:
        write_kick(waiting)


# --- sweep and read -------------------------------------------------------------------------------


def writes_due(limit: int) -> list[int]:
    """What the sweeper should (re)send: unsent rows past their time that the on-commit kick has
    had a fair chance at, and rows whose sender died holding the lease."""
    now = timezone.now()
    grace = now - timedelta(seconds=settings.CRCR_SWEEP_GRACE_SECONDS)
    fresh = Q(state=State.PENDING, next_attempt_at__lte=grace)
    retry = Q(state=State.RETRYING, next_attempt_at__lte=now)
    abandoned = Q(state=State.SENDING, lease_expires_at__lt=now)
    return list(UpstreamWrite.objects.filter(fresh | retry | abandoned).order_by("next_attempt_at").values_list("pk", flat=True)[:limit])


def writes_recent(limit: int = 50) -> list[UpstreamWrite]:
    """The newest upstream writes with their attempts, for /relay/deliveries."""
    attempts = Prefetch("attempt_log", queryset=UpstreamWriteAttempt.objects.order_by("number"))
    return list(UpstreamWrite.objects.prefetch_related(attempts).order_by("-created_at", "-id")[:limit])
