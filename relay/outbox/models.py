"""The columns every outbox row and every attempt row has. Abstract: each kind keeps its own table
(relay_dispatch, relay_upstreamwrite, …) and adds its states, outcomes and targets."""

from django.db import models
from django.utils import timezone


class OutboxRow(models.Model):
    """One intended send. The row is the source of truth; task messages only point at it.

    Subclasses define `State` (with at least PENDING, SENDING, SENT, RETRYING, FAILED), redeclare
    `state` with those choices, and name their UNSENT_STATES (what is waiting to be sent)."""

    state = models.CharField(max_length=16, default="pending")
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(default=timezone.now)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class OutboxAttempt(models.Model):
    """Every try at sending a row leaves one of these. Subclasses add the foreign key to their row
    and redeclare `outcome` with their `Outcome` choices."""

    number = models.PositiveIntegerField()
    started_at = models.DateTimeField(default=timezone.now)
    duration_ms = models.PositiveIntegerField(default=0)
    status_code = models.PositiveIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=16)
    error = models.TextField(blank=True)
    retry_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
        ordering = ["number"]
