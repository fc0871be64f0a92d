"""Reads for /notifications: each subscription with what was sent to it and what failed."""

from dataclasses import dataclass
from urllib.parse import urlsplit

from django.db.models import Count, Prefetch, Q

from ..models.triage import Notification, NotificationAttempt, NotificationEvent, Subscription

SHOWN_PER_SUBSCRIPTION = 50


def target_shown(subscription: Subscription) -> str:
    """Webhook URLs and addresses are credentials of a sort: the page shows only their host."""
    if subscription.channel == Subscription.Channel.EMAIL:
        return "…@" + subscription.target.rpartition("@")[2]
    parts = urlsplit(subscription.target)
    return f"{parts.scheme}://{parts.netloc}/…"


@dataclass
class SubscriptionLog:
    subscription: Subscription
    sent: int
    failed: int
    waiting: int
    notifications: list[Notification]

    @property
    def target(self) -> str:
        return target_shown(self.subscription)


def notifications_log(subscription_id: int | None = None, state: str = "") -> list[SubscriptionLog]:
    subscriptions = (
        Subscription.objects.select_related("project", "user")
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
    return list(NotificationEvent.objects.select_related("project").order_by("-occurred_at", "-id")[:limit])


def subscription_notifications(subscription: Subscription):
    """What was sent to one subscription, newest first, with every attempt (a queryset: the API pages it)."""
    return (
        Notification.objects.filter(subscription=subscription)
        .select_related("event")
        .prefetch_related("attempt_log")
        .order_by("-id")
    )
