"""Sending one dispatch: claim the row with a conditional UPDATE, call GitHub, and record the
attempt and the row's next state together. Transient failures back off (capped, jittered,
stored on the row); permanent ones stop and stay visible."""

import logging
import random
import time
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from . import github, installations, signals
from .callback_tokens import CallbackBinding, callback_token_sign
from .models import Dispatch, DispatchAttempt
from .payloads import client_payload

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SendOutcome:
    outcome: str
    status_code: int | None = None
    error: str = ""
    retry_after: float | None = None


def dispatch_claim(dispatch_id: int) -> Dispatch | None:
    """Take the row if it is due (or its sender's lease ran out). Exactly one caller wins."""
    now = timezone.now()
    due = Q(state__in=Dispatch.OPEN_STATES, next_attempt_at__lte=now) | Q(state=Dispatch.State.SENDING, lease_expires_at__lt=now)
    lease = now + timedelta(seconds=settings.CRCR_DISPATCH_LEASE_SECONDS)
    claimed = Dispatch.objects.filter(due, pk=dispatch_id).update(state=Dispatch.State.SENDING, lease_expires_at=lease)
    if claimed != 1:
        return None
    return Dispatch.objects.select_related("delivery", "project").get(pk=dispatch_id)


def dispatch_send(dispatch_id: int) -> str | None:
    """Claim, send, record. Returns the row's new state, or None when there was nothing to do."""
    dispatch = dispatch_claim(dispatch_id)
    if dispatch is None:
        return None
    started = time.monotonic()
    started_at = timezone.now()
    outcome = _send(dispatch)
    return dispatch_record(dispatch, outcome, started_at, int((time.monotonic() - started) * 1000))


def _send(dispatch: Dispatch) -> SendOutcome:
    repo = dispatch.project.full_name
    try:
        installation_id = _installation_id(repo)
        github.repository_dispatch(installation_id, repo, dispatch.event_type, dispatch_client_payload(dispatch))
    except github.NotInstalled as exc:
        return SendOutcome(DispatchAttempt.Outcome.NOT_INSTALLED, exc.status, str(exc))
    except github.PermanentGitHubError as exc:
        return SendOutcome(DispatchAttempt.Outcome.PERMANENT, exc.status, str(exc))
    except github.TransientGitHubError as exc:
        return SendOutcome(DispatchAttempt.Outcome.TRANSIENT, exc.status, str(exc), exc.retry_after)
    return SendOutcome(DispatchAttempt.Outcome.SENT, 204)


def _installation_id(repo: str) -> int:
    known = installations.installation_for(repo)
    if known is not None:
        return known
    found = github.installation_id_for_repo(repo)
    installations.installation_remember(repo, found)
    return found


def dispatch_client_payload(dispatch: Dispatch) -> dict:
    delivery = dispatch.delivery
    binding = CallbackBinding(delivery.delivery_id, dispatch.project.full_name, dispatch.pr_number, dispatch.head_sha)
    return client_payload(delivery.event, delivery.delivery_id, delivery.payload, callback_token_sign(binding))


def dispatch_record(dispatch: Dispatch, outcome: SendOutcome, started_at, duration_ms: int) -> str:
    number = dispatch.attempts + 1
    state, retry_at = _next_state(dispatch, outcome, number)
    with transaction.atomic():
        DispatchAttempt.objects.create(
            dispatch=dispatch, number=number, started_at=started_at, duration_ms=duration_ms,
            status_code=outcome.status_code, outcome=outcome.outcome, error=outcome.error[:2000], retry_at=retry_at,
        )
        fields = {"state": state, "attempts": number, "lease_expires_at": None, "last_error": outcome.error[:2000]}
        if retry_at:
            fields["next_attempt_at"] = retry_at
        if state == Dispatch.State.SENT:
            fields["sent_at"] = timezone.now()
        Dispatch.objects.filter(pk=dispatch.pk, state=Dispatch.State.SENDING).update(**fields)
        if state == Dispatch.State.SENT:
            transaction.on_commit(lambda: signals.dispatch_sent.send(sender=Dispatch, dispatch_id=dispatch.pk))
    logger.info("dispatch %s to %s: %s (attempt %s)", dispatch.pk, dispatch.project.full_name, state, number)
    return state


def _next_state(dispatch: Dispatch, outcome: SendOutcome, number: int):
    if outcome.outcome == DispatchAttempt.Outcome.SENT:
        return Dispatch.State.SENT, None
    if outcome.outcome == DispatchAttempt.Outcome.NOT_INSTALLED:
        return Dispatch.State.NOT_INSTALLED, None
    if outcome.outcome == DispatchAttempt.Outcome.PERMANENT or _exhausted(dispatch, number):
        return Dispatch.State.FAILED, None
    return Dispatch.State.RETRYING, timezone.now() + timedelta(seconds=retry_delay(number, outcome.retry_after))


def _exhausted(dispatch: Dispatch, number: int) -> bool:
    """Out of attempts or too old, counted from the last re-dispatch when there was one."""
    since = dispatch.resent_at or dispatch.created_at
    too_old = timezone.now() - since > timedelta(hours=settings.CRCR_DISPATCH_MAX_AGE_HOURS)
    return number - dispatch.attempts_before_resend >= settings.CRCR_DISPATCH_MAX_ATTEMPTS or too_old


def retry_delay(attempt: int, retry_after: float | None = None, rng=random) -> float:
    """Exponential from the base, capped, with "equal jitter" (half fixed, half random) so a
    burst of failures does not retry in lockstep; never sooner than GitHub asked."""
    ceiling = min(settings.CRCR_DISPATCH_BACKOFF_MAX_SECONDS, settings.CRCR_DISPATCH_BACKOFF_BASE_SECONDS * 2 ** (attempt - 1))
    delay = ceiling / 2 + rng.uniform(0, ceiling / 2)
    if retry_after is not None:
        delay = max(delay, retry_after)
    return delay


def dispatches_due(limit: int) -> list[int]:
    """What the sweeper should (re)send: open rows past their time that the on-commit kick has had
    a fair chance at, and rows whose sender died holding the lease."""
    now = timezone.now()
    grace = now - timedelta(seconds=settings.CRCR_SWEEP_GRACE_SECONDS)
    fresh = Q(state=Dispatch.State.PENDING, next_attempt_at__lte=grace)
    retry = Q(state=Dispatch.State.RETRYING, next_attempt_at__lte=now)
    abandoned = Q(state=Dispatch.State.SENDING, lease_expires_at__lt=now)
    return list(Dispatch.objects.filter(fresh | retry | abandoned).order_by("next_attempt_at").values_list("pk", flat=True)[:limit])


class ResendRefused(Exception):
    """The delivery cannot be sent again (its payload was pruned by retention)."""


def dispatches_resend(delivery, projects, *, by: str) -> int:
    """Operator action: send a delivery again to chosen projects. Additive: a project's existing
    dispatch is reopened (its attempts, and the jobs that answered it, stay); a project that never
    had one gets a fresh row. A dispatch being sent right now is left to finish."""
    from .intake import _kick_fan_out, dispatches_create

    if delivery.payload_pruned_at is not None:
        raise ResendRefused(f"{delivery.delivery_id}: its payload was pruned by retention, so it cannot be sent again")
    projects = list(projects)
    now = timezone.now()
    with transaction.atomic():
        existing = Dispatch.objects.select_for_update().filter(delivery=delivery, project__in=projects)
        have = set(existing.values_list("project_id", flat=True))
        reopened = existing.exclude(state=Dispatch.State.SENDING).update(
            state=Dispatch.State.PENDING, next_attempt_at=now, lease_expires_at=None, resent_at=now, resent_by=by[:150],
            attempts_before_resend=F("attempts"), last_error=f"re-dispatched by {by}"[:2000],
        )  # fmt: skip
        created = dispatches_create(delivery, [p for p in projects if p.pk not in have])
        transaction.on_commit(lambda: _kick_fan_out(delivery.pk))
    logger.info("%s re-dispatched delivery %s: %s reopened, %s new", by, delivery.delivery_id, reopened, created)
    return reopened + created
