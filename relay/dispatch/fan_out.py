"""Fanning a delivery out: one dispatch row per eligible downstream project, made in the
intake's transaction; the send tasks are kicked after commit. Nothing here calls GitHub."""

import logging

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from ..github import installations
from ..models import Delivery, Dispatch, Project
from .tasks import delivery_fan_out

logger = logging.getLogger(__name__)


def dispatches_create(delivery: Delivery, projects=None) -> int:
    """One dispatch row per eligible project; repos known not to have the App are marked so at
    once instead of failing on every event. Older heads of the same PR become moot. Nightly-only
    repos (allowlist `events: [nightly]`) take no PR or push dispatch."""
    projects = [
        p for p in (projects if projects is not None else Project.objects.dispatch_targets()) if p.takes_pull_requests
    ]
    installed = installations.installed_names()
    now = timezone.now()
    rows = [_dispatch_row(delivery, p, installed, now) for p in projects]
    Dispatch.objects.bulk_create(rows)
    _supersede_older_heads(delivery)
    transaction.on_commit(lambda: _kick_fan_out(delivery.pk))
    return len(rows)


def _dispatch_row(delivery: Delivery, project: Project, installed: set[str] | None, now) -> Dispatch:
    known_missing = installed is not None and project.full_name.lower() not in installed
    return Dispatch(
        delivery=delivery,
        project=project,
        state=Dispatch.State.NOT_INSTALLED if known_missing else Dispatch.State.PENDING,
        last_error="the App is not installed on this repository" if known_missing else "",
        event_type=delivery.event,
        pr_number=delivery.pr_number,
        head_sha=delivery.head_sha,
        next_attempt_at=now,
        created_at=now,
    )


def _supersede_older_heads(delivery: Delivery) -> None:
    if delivery.event != "pull_request" or not delivery.pr_number or not delivery.head_sha:
        return
    stale = Dispatch.objects.filter(
        pr_number=delivery.pr_number, event_type="pull_request", state__in=Dispatch.OPEN_STATES
    )
    stale = stale.exclude(head_sha=delivery.head_sha).exclude(delivery=delivery)
    stale.update(
        state=Dispatch.State.SUPERSEDED,
        last_error=f"superseded by head {delivery.head_sha[:12]} ({delivery.delivery_id})",
    )


def _kick_fan_out(delivery_pk: int) -> None:
    """Best effort: if the broker is down the rows stay pending and the sweeper sends them."""
    try:
        delivery_fan_out.apply_async(args=[delivery_pk])
    except Exception as exc:  # noqa: BLE001 - any broker failure; the sweeper is the fallback
        logger.warning("could not enqueue fan-out for delivery %s (sweeper will send): %s", delivery_pk, exc)


class ResendRefused(Exception):
    """The delivery cannot be sent again (its payload was pruned by retention)."""


def dispatches_resend(delivery, projects, *, by: str) -> int:
    """Operator action: send a delivery again to chosen projects. Additive: a project's existing
    dispatch is reopened (its attempts, and the jobs that answered it, stay); a project that never
    had one gets a fresh row. A dispatch being sent right now is left to finish."""
    if delivery.payload_pruned_at is not None:
        raise ResendRefused(f"{delivery.delivery_id}: its payload was pruned by retention, so it cannot be sent again")
    projects = list(projects)
    now = timezone.now()
    with transaction.atomic():
        existing = Dispatch.objects.select_for_update().filter(delivery=delivery, project__in=projects)
        have = set(existing.values_list("project_id", flat=True))
        reopened = existing.exclude(state=Dispatch.State.SENDING).update(
            state=Dispatch.State.PENDING,
            next_attempt_at=now,
            lease_expires_at=None,
            resent_at=now,
            resent_by=by[:150],
            attempts_before_resend=F("attempts"),
            last_error=f"re-dispatched by {by}"[:2000],
        )
        created = dispatches_create(delivery, [p for p in projects if p.pk not in have])
    logger.info("%s re-dispatched delivery %s: %s reopened, %s new", by, delivery.delivery_id, reopened, created)
    return reopened + created
