"""Webhook deliveries and the dispatches they fan out to, each send attempt a row (through the
outbox engine, relay.outbox)."""

from django.db import models
from django.utils import timezone

from ..outbox.models import OutboxAttempt, OutboxRow
from .registry import Project

CALLBACK_TOKEN_MAX_AGE_SECONDS = 7 * 24 * 3600
"""How long a dispatch's signed callback token lives (relay.callbacks.tokens): a dispatch may wait
days for a runner, and re-runs reuse the original payload for as long. So a callback can change a
job row only this long after its dispatch (the tallies' refresh scans no further back)."""

BISECT_EVENT = "bisect"
"""The event of a bisection probe's Delivery, Dispatch and job rows (relay.models.bisection): a
probe asks a question of ours about a commit and runs only the tests asked about, so no cell,
count or tally takes it as the commit's result (relay.stats.runkinds, the `counted`
querysets here, the level tallies' SQL)."""
PROBE_KEY_PREFIX = "bisect-"
"""A probe's delivery id starts so (`bisect-<bisection>-<probe>`): a GitHub delivery GUID never
does, so a callback naming one answers a probe, whatever event type it reports."""


CLOSING = {"event": "pull_request", "action": "closed"}
"""A PR's closing delivery (the one definition: DeliveryQuerySet.closings, Delivery.is_closing,
and the SQL of relay.stats.runkinds): its dispatches are a clean-up downstream, not a test of the head."""


def is_probe_key(delivery_id: str) -> bool:
    return delivery_id.startswith(PROBE_KEY_PREFIX)


class DeliveryQuerySet(models.QuerySet):
    def closings(self):
        """A PR's closing deliveries: their dispatches are a clean-up downstream, not a test of the
        head, so no cell, gate or count waits on them (the one definition; Delivery.is_closing)."""
        return self.filter(**CLOSING)

    def probes(self):
        """Bisection probes (relay.models.bisection): a question of ours about a commit, not an
        upstream event; nothing that counts a commit's dispatches waits on them."""
        return self.filter(event=BISECT_EVENT)

    def counted(self):
        return self.exclude(**CLOSING).exclude(event=BISECT_EVENT)


class DispatchQuerySet(models.QuerySet):
    def counted(self):
        """Dispatches a result is expected for: not a PR's closing clean-up (DeliveryQuerySet.closings)
        nor a bisection probe (DeliveryQuerySet.probes)."""
        return self.exclude(delivery__in=Delivery.objects.closings()).exclude(event_type=BISECT_EVENT)


class Delivery(models.Model):
    """One webhook delivery from GitHub, deduplicated on X-GitHub-Delivery."""

    class Outcome(models.TextChoices):
        RELAYED = "relayed", "relayed to downstream"
        RECORDED = "recorded", "recorded"
        IGNORED = "ignored", "ignored"

    guid = models.CharField(
        max_length=100, unique=True, help_text="X-GitHub-Delivery: GitHub's id of this webhook delivery"
    )
    event = models.CharField(max_length=64, db_index=True)
    action = models.CharField(max_length=64, blank=True, db_index=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices, db_index=True)
    reason = models.CharField(max_length=200, blank=True)
    repo_full_name = models.CharField(max_length=140, blank=True)
    pr_number = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    head_sha = models.CharField(max_length=40, blank=True, db_index=True)
    ref = models.CharField(max_length=255, blank=True)
    label = models.CharField(max_length=100, blank=True)
    sender = models.CharField(max_length=100, blank=True)
    payload = models.JSONField(default=dict)
    payload_bytes = models.PositiveIntegerField(default=0)
    payload_pruned_at = models.DateTimeField(
        null=True, blank=True, help_text="when retention cut the stored payload to what the relay still reads"
    )
    received_at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["-received_at", "-id"]
        verbose_name_plural = "deliveries"
        permissions = [("redispatch_delivery", "Can re-dispatch a delivery to downstream repos")]

    def __str__(self):
        return f"{self.event}.{self.action or '-'} {self.guid}"

    @property
    def is_closing(self) -> bool:
        return (self.event, self.action) == (CLOSING["event"], CLOSING["action"])


class Dispatch(OutboxRow):
    """One repository_dispatch of a delivery to one downstream project, sent through the outbox
    engine (relay.outbox; relay.dispatch.sending says how to send one)."""

    SEND_TASK = "relay.dispatch_send"
    """The registered name of the task that sends one row: the outbox kicks it (relay.dispatch, and
    relay.bisect for a probe's dispatch, which may not import relay.dispatch: dispatch reaches
    bisect through the callbacks) and the task is registered under it."""

    class State(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        RETRYING = "retrying"
        FAILED = "failed"
        NOT_INSTALLED = "not_installed", "not installed"
        SUPERSEDED = "superseded"

    OPEN_STATES = (State.PENDING, State.RETRYING)
    FINAL_STATES = (State.SENT, State.FAILED, State.NOT_INSTALLED, State.SUPERSEDED)

    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="dispatches")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="dispatches")
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    event_type = models.CharField(max_length=64)
    pr_number = models.PositiveIntegerField(null=True, blank=True)
    head_sha = models.CharField(max_length=40, blank=True)
    resent_at = models.DateTimeField(null=True, blank=True, help_text="when an operator last re-dispatched it")
    resent_by = models.CharField(max_length=150, blank=True)
    attempts_before_resend = models.PositiveIntegerField(
        default=0, help_text="attempts made before the last re-dispatch (its retry budget starts after them)"
    )

    objects = DispatchQuerySet.as_manager()

    class Meta:
        ordering = ["project__full_name"]
        verbose_name_plural = "dispatches"
        constraints = [models.UniqueConstraint(fields=["delivery", "project"], name="dispatch_once_per_project")]
        indexes = [
            models.Index(fields=["state", "next_attempt_at"], name="dispatch_due_idx"),
            models.Index(fields=["pr_number", "state"], name="dispatch_pr_state_idx"),
            # The supersede UPDATE at every PR webhook reads only open rows: this index holds
            # nothing else, so a backlog of pending rows (GitHub or broker down) cannot make the
            # planner walk it through dispatch_due_idx (docs/performance.md).
            models.Index(
                fields=["pr_number"],
                condition=models.Q(state__in=["pending", "retrying"]),
                name="dispatch_open_pr_idx",
            ),
        ]

    def __str__(self):
        return f"{self.delivery.guid} → {self.project} ({self.state})"


class DispatchAttempt(OutboxAttempt):
    """Every try at sending a dispatch leaves one of these."""

    class Outcome(models.TextChoices):
        SENT = "sent"
        TRANSIENT = "transient", "transient failure"
        PERMANENT = "permanent", "permanent failure"
        NOT_INSTALLED = "not_installed", "not installed"

    dispatch = models.ForeignKey(Dispatch, on_delete=models.CASCADE, related_name="attempt_log")
    outcome = models.CharField(max_length=16, choices=Outcome.choices)

    class Meta(OutboxAttempt.Meta):
        constraints = [models.UniqueConstraint(fields=["dispatch", "number"], name="dispatch_attempt_number_unique")]
