"""Webhook intake: decide what a verified delivery means, then store it and its dispatch rows in
one transaction (relay.dispatch.fan_out makes the dispatch rows and kicks the fan-out after commit). Nothing here calls GitHub."""

import logging
import re
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction

from .. import follow_up
from ..dispatch.fan_out import dispatches_create
from ..github import installations
from ..models import Delivery
from .commits import commits_record
from .webhooks import WebhookRequest

logger = logging.getLogger(__name__)

PR_DISPATCH_ACTIONS = {"opened", "reopened", "synchronize", "closed"}
CRCR_LABEL_PREFIX = "ciflow/crcr/"
TRUNK_TAG_RE = re.compile(r"refs/tags/ciflow/trunk/([1-9][0-9]{0,8})")
"""pytorchbot's merge pushes this tag at the PR's head to run trunk jobs: an L4 backend's merge run."""


def trunk_tag_pr(payload: dict) -> int | None:
    """The PR a `ciflow/trunk/<pr>` tag push runs for (its head is the push's `after`), else None."""
    match = TRUNK_TAG_RE.fullmatch(str(payload.get("ref") or ""))
    return int(match.group(1)) if match else None


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
    if payload.get("deleted"):
        return Route(Delivery.Outcome.IGNORED, "deletions of a branch or tag are not relayed")
    if (pr := trunk_tag_pr(payload)) is not None:
        return Route(Delivery.Outcome.RELAYED, f"ciflow/trunk merge run of PR #{pr}")
    if not ref.startswith("refs/heads/"):
        return Route(Delivery.Outcome.IGNORED, "tag pushes are not relayed (except ciflow/trunk/<pr>)")
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
    return IntakeResult(
        202 if route.outcome != Delivery.Outcome.IGNORED else 200, _answer(delivery, route, dispatch_count)
    )


def _answer(delivery: Delivery, route: Route, dispatch_count: int) -> dict:
    status = {"relayed": "accepted", "recorded": "recorded", "ignored": "ignored"}[route.outcome]
    body = {"ok": True, "status": status, "delivery": delivery.guid}
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
        follow_up.delivery_recorded(delivery)
    return delivery, count


def _delivery_fields(hook: WebhookRequest, route: Route) -> dict:
    payload = hook.payload
    pr = payload.get("pull_request") or {}
    keep = route.outcome != Delivery.Outcome.IGNORED
    return {
        "guid": hook.guid,
        "event": hook.event[:64],
        "action": str(payload.get("action", ""))[:64],
        "outcome": route.outcome,
        "reason": route.reason[:200],
        "repo_full_name": str((payload.get("repository") or {}).get("full_name", ""))[:140],
        "pr_number": _pr_number(hook.event, payload),
        "head_sha": _head_sha(hook.event, payload),
        "ref": str(payload.get("ref") or pr.get("head", {}).get("ref") or "")[:255],
        "label": str((payload.get("label") or {}).get("name", ""))[:100],
        "sender": str((payload.get("sender") or {}).get("login", ""))[:100],
        "payload": payload if keep else {},
        "payload_bytes": hook.size,
    }


def _pr_number(event: str, payload: dict) -> int | None:
    if event == "push":
        return trunk_tag_pr(payload)
    number = (payload.get("pull_request") or {}).get("number")
    return number if isinstance(number, int) else None


def _head_sha(event: str, payload: dict) -> str:
    if event == "push":
        sha = payload.get("after") or ""
    else:
        sha = ((payload.get("pull_request") or {}).get("head") or {}).get("sha") or ""
    return str(sha)[:40]
