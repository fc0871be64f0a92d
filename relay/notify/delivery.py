"""Notifications as a kind of the one outbox engine (relay.outbox): claimed with a conditional
UPDATE, sent on the subscription's channel, recorded with an attempt row; transient failures
back off (CRCR_NOTIFY_* settings), permanent ones stop and stay visible on /notifications."""

from django.conf import settings

from ..models.notify import Notification, NotificationAttempt, NotificationEvent, Subscription
from ..outbox.engine import Outbox, Result
from . import channels
from .targets import target_scrubbed

State, Outcome = Notification.State, NotificationAttempt.Outcome
DIGEST_EVENTS_LISTED = 100


SEND_TASK = "relay.notification_send"
"""The registered name of the task that sends one notification: the outbox kicks it, the task declares it."""


class Notifications(Outbox):
    row_model = Notification
    attempt_model = NotificationAttempt
    attempt_row_field = "notification"
    settings_prefix = "CRCR_NOTIFY"
    final_states = {Outcome.SENT: State.SENT, Outcome.PERMANENT: State.FAILED}
    label = "notification"
    related = ("subscription", "event", "event__project")

    def attempt(self, notification: Notification) -> Result:
        subscription = notification.subscription
        message = message_for(notification)
        try:
            status = _send(subscription, notification, message)
        except channels.SendError as exc:
            outcome = Outcome.PERMANENT if exc.permanent else Outcome.TRANSIENT
            error = target_scrubbed(str(exc), subscription.channel, subscription.target)
            return Result(outcome, status_code=exc.status, error=error, retry_after=exc.retry_after)
        return Result(Outcome.SENT, status_code=status)

    task_name = SEND_TASK

    def describe(self, notification: Notification) -> str:
        return f"{notification.subscription.channel} {notification.subscription.name}"


NOTIFICATIONS = Notifications()


def _send(subscription: Subscription, notification: Notification, message: channels.Message) -> int | None:
    if subscription.channel == Subscription.Channel.EMAIL:
        channels.email_send(subscription.target, message)
        return None
    body = (
        channels.slack_body(message)
        if subscription.channel == Subscription.Channel.SLACK
        else channels.generic_body(message)
    )
    headers = {"X-CRCR-Event": message.kind, "X-CRCR-Notification": str(notification.pk)}
    return channels.webhook_post(subscription.target, body, headers)


# --- what is said -----------------------------------------------------------------------------------


def message_for(notification: Notification) -> channels.Message:
    if notification.event_id:
        return event_message(notification.event, notification.pk)
    return digest_message(notification)


def event_message(event: NotificationEvent, notification_id: int | None = None) -> channels.Message:
    details = event.details or {}
    lines = list(details.get("lines", []))
    payload = {
        "notification_id": notification_id,
        "event": {
            "id": event.pk,
            "kind": event.kind,
            "key": event.key,
            "occurred_at": event.occurred_at.isoformat(),
            "backend": event.project.full_name if event.project_id else None,
            "head_sha": event.head_sha or None,
            "known_issue": event.issue_id,
            "tests": event.test_ids,
            "details": details,
        },
    }
    return channels.Message(event.kind, event.title, lines, payload, details.get("url") or _url("/"))


def digest_message(notification: Notification) -> channels.Message:
    events = [
        n.event
        for n in notification.digested.select_related("event").order_by("event__occurred_at")[:DIGEST_EVENTS_LISTED]
    ]
    lines = [f"{e.occurred_at:%H:%M} UTC · {e.title}" for e in events]
    title = f"CRCR daily digest for {notification.digest_date}: {len(events)} event{'s' if len(events) != 1 else ''}"
    payload = {
        "notification_id": notification.pk,
        "digest_date": str(notification.digest_date),
        "events": [
            {"id": e.pk, "kind": e.kind, "title": e.title, "occurred_at": e.occurred_at.isoformat()} for e in events
        ],
    }
    return channels.Message("digest", title, lines, payload, _url("/notifications"))


def _url(path: str) -> str:
    return f"{settings.CRCR_PUBLIC_URL}{path}"
