"""Webhook intake: decide what a verified delivery means, then store it and its dispatch rows in
one transaction and kick the fan-out after commit. Nothing here calls GitHub."""

import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from . import installations, signals
from .commits import commits_record
from .models import Delivery, Dispatch, Project
from .webhooks import WebhookRequest

logger = logging.getLogger(__name__)

PR_DISPATCH_ACTIONS = {"opened", "reopened", "synchronize", "closed"}
CRCR_LABEL_PREFIX = "ciflow/crcr/"


@dataclass(frozen=True)
class Route:
    outcome: str
    reason: str = ""

    @property
    def dispatches(self) -> bool:
        return self.outcome == Delivery.Outcome.RELAYED


@dataclass(frozen=True)
class IntakeResult:
    status: int
    body: dict


def event_route(event: str, payload: dict) -> Route:
    """What the relay does with an event from the upstream repo."""
    action = payload.get("action", "")
    if event == "pull_request":
        return _pull_request_route(action, payload)
    if event == "push":
        return _push_route(payload)
    if event in ("check_run", "check_suite") and action == "rerequested":
        return Route(Delivery.Outcome.RECORDED, f"{event} re-run request")
    return Route(Delivery.Outcome.IGNORED, f"{event}.{action or '-'} is not relayed")


def _pull_request_route(action: str, payload: dict) -> Route:
    if action in PR_DISPATCH_ACTIONS:
        return Route(Delivery.Outcome.RELAYED)
    label = (payload.get("label") or {}).get("name", "")
    if action in ("labeled", "unlabeled") and label.startswith(CRCR_LABEL_PREFIX):
        return Route(Delivery.Outcome.RECORDED, f"{action} {label}")
    return Route(Delivery.Outcome.IGNORED, f"pull_request.{action or '-'} is not relayed")


def _push_route(payload: dict) -> Route:
    ref = payload.get("ref") or ""
    if not ref.startswith("refs/heads/"):
        return Route(Delivery.Outcome.IGNORED, "tag pushes are not relayed")
    if payload.get("deleted"):
        return Route(Delivery.Outcome.IGNORED, "branch deletions are not relayed")
    return Route(Delivery.Outcome.RELAYED)


def is_upstream(payload: dict) -> bool:
    repo = payload.get("repository") or {}
    if str(repo.get("full_name", "")).lower() != settings.CRCR_UPSTREAM_REPO.lower():
        return False
    return settings.CRCR_UPSTREAM_REPO_ID is None or repo.get("id") == settings.CRCR_UPSTREAM_REPO_ID


def webhook_intake(hook: WebhookRequest) -> IntakeResult:
    if hook.event == "ping":
        return IntakeResult(200, {"ok": True, "status": "pong", "zen": hook.payload.get("zen", "")})
    if hook.event in installations.INSTALLATION_EVENTS:
        route = Route(Delivery.Outcome.RECORDED, f"{hook.event}.{hook.payload.get('action', '-')}")
    elif not is_upstream(hook.payload):
        route = Route(Delivery.Outcome.IGNORED, "not the upstream repository")
    else:
        route = event_route(hook.event, hook.payload)
    try:
        delivery, dispatch_count = _store(hook, route)
    except IntegrityError:
        return IntakeResult(200, {"ok": True, "status": "duplicate"})
    return IntakeResult(202 if route.outcome != Delivery.Outcome.IGNORED else 200, _answer(delivery, route, dispatch_count))


def _answer(delivery: Delivery, route: Route, dispatch_count: int) -> dict:
    status = {"relayed": "accepted", "recorded": "recorded", "ignored": "ignored"}[route.outcome]
    body = {"ok": True, "status": status, "delivery": delivery.delivery_id}
    if route.dispatches:
        body["dispatches"] = dispatch_count
    if route.reason:
        body["reason"] = route.reason
    return body


def _store(hook: WebhookRequest, route: Route) -> tuple[Delivery, int]:
    with transaction.atomic():
        delivery = Delivery.objects.create(**_delivery_fields(hook, route))
        if hook.event in installations.INSTALLATION_EVENTS:
            installations.installation_event_apply(hook.event, hook.payload)
        count = dispatches_create(delivery) if route.dispatches else 0
        if route.dispatches or route.outcome == Delivery.Outcome.RECORDED:  # a ciflow label change too
            commits_record(hook.event, hook.payload, delivery.received_at)
        transaction.on_commit(
            lambda: signals.delivery_recorded.send(sender=Delivery, delivery_pk=delivery.pk, event=delivery.event, action=delivery.action, outcome=delivery.outcome)
        )
    return delivery, count


def _delivery_fields(hook: WebhookRequest, route: Route) -> dict:
    payload = hook.payload
    pr = payload.get("pull_request") or {}
    keep = route.outcome != Delivery.Outcome.IGNORED
    return {
        "delivery_id": hook.delivery_id,
        "event": hook.event[:64],
        "action": str(payload.get("action", ""))[:64],
        "outcome": route.outcome,
        "reason": route.reason[:200],
        "repo_full_name": str((payload.get("repository") or {}).get("full_name", ""))[:140],
        "pr_number": pr.get("number") if isinstance(pr.get("number"), int) else None,
        "head_sha": _head_sha(hook.event, payload),
        "ref": str(payload.get("ref") or pr.get("head", {}).get("ref") or "")[:255],
        "label": str((payload.get("label") or {}).get("name", ""))[:100],
        "sender": str((payload.get("sender") or {}).get("login", ""))[:100],
        "payload": payload if keep else {},
        "payload_bytes": hook.size,
    }


def _head_sha(event: str, payload: dict) -> str:
    if event == "push":
        sha = payload.get("after") or ""
    else:
        sha = ((payload.get("pull_request") or {}).get("head") or {}).get("sha") or ""
    return str(sha)[:40]


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
    from .tasks import delivery_fan_out

    try:
        delivery_fan_out.apply_async(args=[delivery_pk])
    except Exception as exc:  # noqa: BLE001 - any broker failure; the sweeper is the fallback
        logger.warning("could not enqueue fan-out for delivery %s (sweeper will send): %s", delivery_pk, exc)
