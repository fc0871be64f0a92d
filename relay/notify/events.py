"""Recording an event and the notifications it owes. An event is recorded once (its key is
unique); each matching subscription gets one notification for it (unique per subscription and
event), sent now through the outbox or held for the subscription's daily digest.

Events about results on trunk (a new backend-specific failure with its culprit range, a
recovery, upstream breaking the reference) are detected by relay.notify.trunk, which reads results
through relay.results the way the pages do; readiness and relay health by the HUD (relay.levels.events),
which alone computes them; a known issue seen again after being resolved is detected here, when its
occurrence is recorded. All of them record through `event_emit`."""

import logging

from django.db import IntegrityError, transaction

from ..models.notify import Notification, NotificationEvent
from ..models.triage import IssueOccurrence, KnownIssue
from .subscriptions import subscriptions_for

logger = logging.getLogger(__name__)


def event_emit(kind: str, key: str, title: str, **fields) -> NotificationEvent | None:
    """Record the event and its notifications; None when an event with this key exists already."""
    with transaction.atomic():
        try:
            with transaction.atomic():
                event = NotificationEvent.objects.create(kind=kind, key=key[:200], title=title[:300], **fields)
        except IntegrityError:
            return None
        pending = [n.pk for n in notifications_fan_out(event) if n.state == Notification.State.PENDING]
        transaction.on_commit(lambda: _kick(pending))
    logger.info("event %s: %s (%s notifications to send now)", key, title, len(pending))
    return event


def notifications_fan_out(event: NotificationEvent) -> list[Notification]:
    made = []
    for subscription in subscriptions_for(event):
        state = Notification.State.HELD if subscription.digest else Notification.State.PENDING
        try:
            with transaction.atomic():
                made.append(Notification.objects.create(subscription=subscription, event=event, state=state))
        except IntegrityError:
            continue  # this subscription already has it
    return made


def _kick(pks: list[int]) -> None:
    from .delivery import NOTIFICATIONS

    for pk in pks:
        NOTIFICATIONS.kick(pk)


def issues_seen_again(occurrences: list[IssueOccurrence]) -> list[NotificationEvent]:
    """A resolved known issue that matched a new failure: once per resolution."""
    events = []
    for occurrence in occurrences:
        issue = occurrence.issue
        if (
            issue.state != KnownIssue.State.RESOLVED
            or issue.resolved_at is None
            or occurrence.seen_at <= issue.resolved_at
        ):
            continue
        event = event_emit(
            NotificationEvent.Kind.ISSUE_SEEN_AGAIN,
            f"issue_seen_again:{issue.pk}:{int(issue.resolved_at.timestamp())}",
            f"Resolved known issue #{issue.pk} seen again: {issue.title} ({occurrence.test_id} on {occurrence.project.full_name})",
            project=occurrence.project,
            issue=issue,
            head_sha=occurrence.head_sha,
            test_ids=[occurrence.test_id],
            details={"issue_url": issue.url, "resolved_at": issue.resolved_at.isoformat()},
        )
        if event is not None:
            events.append(event)
    return events
