"""Fanning a delivery out: one dispatch row per eligible downstream project, made in the
intake's transaction; the send tasks are kicked after commit. Nothing here calls GitHub."""

import logging

from django.db import transaction
from django.utils import timezone

from ..github import installations
from ..models import Delivery, Dispatch, Project
from .tasks import delivery_fan_out

logger = logging.getLogger(__name__)


def dispatches_create(delivery: Delivery, projects=None) -> int:
    """One dispatch row per eligible project; repos known not to have the App are marked so at
    once instead of failing on every event. Older heads of the same PR become moot. Nightly-only
    repos (allowlist `events: [nightly]`) take no PR or push dispatch."""
    projects = [p for p in (projects if projects is not None else Project.objects.dispatch_targets()) if p.takes_pull_requests]
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
    stale = Dispatch.objects.filter(pr_number=delivery.pr_number, event_type="pull_request", state__in=Dispatch.OPEN_STATES)
    stale = stale.exclude(head_sha=delivery.head_sha).exclude(delivery=delivery)
    stale.update(state=Dispatch.State.SUPERSEDED, last_error=f"superseded by head {delivery.head_sha[:12]} ({delivery.delivery_id})")


def _kick_fan_out(delivery_pk: int) -> None:
    """Best effort: if the broker is down the rows stay pending and the sweeper sends them."""
    try:
        delivery_fan_out.apply_async(args=[delivery_pk])
    except Exception as exc:  # noqa: BLE001 - any broker failure; the sweeper is the fallback
        logger.warning("could not enqueue fan-out for delivery %s (sweeper will send): %s", delivery_pk, exc)


def dispatches_resend(delivery, projects, *, by: str) -> int:
    """Operator action: send a delivery again to chosen projects, as fresh rows."""
    with transaction.atomic():
        Dispatch.objects.filter(delivery=delivery, project__in=projects).delete()
        count = dispatches_create(delivery, projects)
    logger.info("%s re-dispatched delivery %s to %s projects", by, delivery.delivery_id, count)
    return count
