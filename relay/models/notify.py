"""Who hears about what: subscriptions, the events they match and the notifications sent for them
(through the outbox engine).

relay/models/__init__.py imports this module (so Django sees these as relay models)."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..outbox.models import OutboxAttempt, OutboxRow
from .triage import MAX_PATTERN_CHARS, KnownIssue


class NotificationEvent(models.Model):
    """Something subscribers may want to hear about, recorded once (its `key` is unique)."""

    class Kind(models.TextChoices):
        NEW_FAILURE = "new_failure", "new backend-specific failure on trunk"
        RECOVERY = "recovery", "recovered on trunk"
        UPSTREAM_BROKEN = "upstream_broken", "upstream broke the reference"
        ISSUE_SEEN_AGAIN = "issue_seen_again", "known issue seen again after being resolved"
        AT_RISK = "at_risk", "readiness at risk of demotion"
        HEALTH_DEGRADED = "health_degraded", "relay health degraded"
        HEALTH_RECOVERED = "health_recovered", "relay health recovered"
        BISECTED = "bisected", "bisection named a culprit (verified or not reproducible)"

    kind = models.CharField(max_length=20, choices=Kind.choices)
    key = models.CharField(
        max_length=200, unique=True, help_text="what makes the event itself, e.g. new_failure:<repo>:<sha>"
    )
    project = models.ForeignKey(
        "relay.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="notification_events"
    )
    issue = models.ForeignKey(
        KnownIssue, on_delete=models.CASCADE, null=True, blank=True, related_name="notification_events"
    )
    head_sha = models.CharField(max_length=40, blank=True)
    test_ids = models.JSONField(default=list, blank=True)
    title = models.CharField(max_length=300)
    details = models.JSONField(default=dict, blank=True, help_text="culprit range, links, counts")
    occurred_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-occurred_at", "-id"]

    def __str__(self):
        return self.title


class Subscription(models.Model):
    """Who hears about which events, through which channel. Scope: a backend, a level, a known
    issue or a test pattern (all that are set must hold; none set means everything)."""

    class Channel(models.TextChoices):
        WEBHOOK = "webhook", "webhook (generic JSON)"
        SLACK = "slack", "webhook (Slack-compatible)"
        EMAIL = "email", "email"

    class Origin(models.TextChoices):
        USER = "user", "made by a user"
        ONCALL = "oncall", "a backend's oncall, by default"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="crcr_subscriptions"
    )
    name = models.CharField(max_length=100)
    project = models.ForeignKey(
        "relay.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="subscriptions"
    )
    level = models.CharField(max_length=2, blank=True, help_text="L1 … L4 (relay.models.Level)")
    issue = models.ForeignKey(KnownIssue, on_delete=models.CASCADE, null=True, blank=True, related_name="subscriptions")
    test_pattern = models.CharField(max_length=MAX_PATTERN_CHARS, blank=True)
    events = models.JSONField(default=list, help_text="event kinds; empty means all")
    channel = models.CharField(max_length=8, choices=Channel.choices)
    target = models.CharField(max_length=500, help_text="the webhook URL or the email address")
    digest = models.BooleanField(default=False, help_text="collect the day's events into one message")
    origin = models.CharField(max_length=8, choices=Origin.choices, default=Origin.USER)
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "project"], condition=Q(origin="oncall"), name="subscription_one_oncall_default"
            ),
        ]

    def __str__(self):
        return self.name


class Notification(OutboxRow):
    """One message to one subscription: for one event, or a digest of a day's events. A row of
    the outbox (relay.outbox): claimed, sent, retried with backoff, every try an attempt row."""

    class State(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        RETRYING = "retrying"
        FAILED = "failed"
        HELD = "held", "held for the daily digest"
        DIGESTED = "digested", "sent in a digest"

    UNSENT_STATES = (State.PENDING, State.RETRYING)

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="notifications")
    event = models.ForeignKey(
        NotificationEvent, on_delete=models.CASCADE, null=True, blank=True, related_name="notifications"
    )
    digest_date = models.DateField(null=True, blank=True)
    digest = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="digested")
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["subscription", "event"], condition=Q(event__isnull=False), name="notification_once_per_event"
            ),
            models.UniqueConstraint(
                fields=["subscription", "digest_date"],
                condition=Q(digest_date__isnull=False),
                name="notification_one_digest_a_day",
            ),
        ]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="notification_due_idx")]

    def __str__(self):
        what = self.event.title if self.event_id else f"digest {self.digest_date}"
        return f"{self.subscription}: {what} ({self.state})"


class NotificationAttempt(OutboxAttempt):
    """Every try at sending a notification leaves one of these."""

    class Outcome(models.TextChoices):
        SENT = "sent"
        TRANSIENT = "transient", "transient failure"
        PERMANENT = "permanent", "permanent failure"

    notification = models.ForeignKey(Notification, on_delete=models.CASCADE, related_name="attempt_log")
    outcome = models.CharField(max_length=16, choices=Outcome.choices)

    class Meta(OutboxAttempt.Meta):
        constraints = [
            models.UniqueConstraint(fields=["notification", "number"], name="notification_attempt_number_unique")
        ]


__all__ = ["NotificationEvent", "Subscription", "Notification", "NotificationAttempt"]
