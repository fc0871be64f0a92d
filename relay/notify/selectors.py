"""Reads for /notifications: each subscription with what was sent to it and what failed."""

from dataclasses import dataclass

from django.db.models import Count, Prefetch, Q

from relay.policy.links import backend_path, commit_path, known_issue_path

from ..models.notify import Notification, NotificationAttempt, NotificationEvent, Subscription
from .targets import target_shown

SHOWN_PER_SUBSCRIPTION = 50


@dataclass
class SubscriptionLog:
    subscription: Subscription
    sent: int
    failed: int
    waiting: int
    notifications: list[Notification]

    @property
    def target(self) -> str:
        return target_shown(self.subscription.channel, self.subscription.target)


def subscriptions_visible(owner=None):
    """Every subscription (owner None: staff), or one user's own."""
    rows = Subscription.objects.order_by("name", "id")
    return rows if owner is None else rows.filter(user=owner)


def notifications_log(subscription_id: int | None = None, state: str = "", owner=None) -> list[SubscriptionLog]:
    subscriptions = (
        subscriptions_visible(owner)
        .select_related("project", "user")
        .annotate(
            sent=Count("notifications", filter=Q(notifications__state=Notification.State.SENT)),
            failed=Count("notifications", filter=Q(notifications__state=Notification.State.FAILED)),
            waiting=Count(
                "notifications", filter=Q(notifications__state__in=["pending", "retrying", "sending", "held"])
            ),
        )
        .order_by("name", "id")
    )
    if subscription_id:
        subscriptions = subscriptions.filter(pk=subscription_id)
    logs = []
    for sub in subscriptions[:100]:
        rows = Notification.objects.filter(subscription=sub).exclude(state=Notification.State.DIGESTED)
        rows = rows.filter(state=state) if state in Notification.State.values else rows
        attempts = Prefetch("attempt_log", queryset=NotificationAttempt.objects.order_by("number"))
        shown = list(
            rows.select_related("event")
            .prefetch_related(attempts)
            .order_by("-created_at", "-id")[:SHOWN_PER_SUBSCRIPTION]
        )
        logs.append(SubscriptionLog(sub, sub.sent, sub.failed, sub.waiting, shown))
    return logs


def events_recent(limit: int = 30) -> list[NotificationEvent]:
    """The newest events, each with `link`: the page it is about (its commit, backend or issue)."""
    events = list(NotificationEvent.objects.select_related("project").order_by("-occurred_at", "-id")[:limit])
    for event in events:
        event.link = event_link(event)
    return events


def event_link(event: NotificationEvent) -> str:
    """A path on this server, never a stored absolute URL (a link is only ever to our own pages)."""
    if event.head_sha:
        return commit_path(event.head_sha)
    if event.issue_id:
        return known_issue_path(event.issue_id)
    if event.project_id:
        return backend_path(event.project.full_name)
    return "/crcr"


def subscription_notifications(subscription: Subscription):
    """What was sent to one subscription, newest first, with every attempt (a queryset: the API pages it)."""
    return (
        Notification.objects.filter(subscription=subscription)
        .select_related("event")
        .prefetch_related("attempt_log")
        .order_by("-id")
    )
