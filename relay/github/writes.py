"""Intending an upstream write (check runs, comments, re-runs): one row per intended write, at
most one unsent and one sending per target. The body is not computed here: the kind's prepare
function (checkruns, oncall, reruns) computes it at send time from the rows as they are then, so
a retry sends the latest truth and a newer change supersedes an unsent older write. Sending is
relay.checks.outbox; the handlers build on the Plan and Skip defined here."""

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from ..github import client as github
from ..models import UpstreamWrite, UpstreamWriteAttempt
from ..outbox.engine import row_kick

logger = logging.getLogger(__name__)
Kind, State, Outcome = UpstreamWrite.Kind, UpstreamWrite.State, UpstreamWriteAttempt.Outcome


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
    return UpstreamWrite.objects.filter(
        target_key=target_key, state__in=[*UpstreamWrite.UNSENT_STATES, State.SENDING]
    ).exists()


def write_unsent(target_key: str) -> UpstreamWrite | None:
    """The write to this target that is waiting to be sent (not yet taken by a sender), if any.
    Its body is computed when it is sent (`Plan`'s handlers), so it will carry whatever was
    committed before then."""
    return UpstreamWrite.objects.filter(target_key=target_key, state__in=UpstreamWrite.UNSENT_STATES).first()


def write_enqueue(kind: str, target_key: str, label: str = "", **targets) -> UpstreamWrite:
    """Intend a write; the kick runs after commit. An unsent write for the same target is
    superseded (its backoff kept, so a rate limit is still honoured)."""
    with transaction.atomic():
        older = UpstreamWrite.objects.filter(target_key=target_key, state__in=UpstreamWrite.UNSENT_STATES).first()
        due = timezone.now()
        if older is not None and UpstreamWrite.objects.filter(
            pk=older.pk, state__in=UpstreamWrite.UNSENT_STATES
        ).update(state=State.SUPERSEDED):
            due = max(due, older.next_attempt_at) if older.state == State.RETRYING else due
        write = _create_unsent(kind, target_key, label[:600], due, targets)
    transaction.on_commit(lambda: write_kick(write.pk))
    return write


def _create_unsent(kind: str, target_key: str, label: str, due, targets: dict) -> UpstreamWrite:
    try:
        with transaction.atomic():
            return UpstreamWrite.objects.create(
                kind=kind, target_key=target_key, target_label=label, next_attempt_at=due, **targets
            )
    except IntegrityError:
        # A concurrent enqueue made the unsent row first; it will compute the same latest truth.
        return UpstreamWrite.objects.get(target_key=target_key, state__in=UpstreamWrite.UNSENT_STATES)


SEND_TASK = "relay.upstream_write_send"
"""The task that sends one UpstreamWrite (relay.checks.tasks.upstream_write_send)."""


def write_kick(write_pk: int, countdown: float = 0.0) -> None:
    row_kick(SEND_TASK, write_pk, countdown, "upstream write")
