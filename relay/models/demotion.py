"""The demotion loop (upstream's "demotion as a closed loop"): one row per demotion pull request
the relay opens against the upstream allowlist, and the audit of every decision the loop takes.

relay/models/__init__.py imports this module; the models it points at are named by string."""

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q
from django.utils import timezone

from .registry import Level


class DemotionPullRequest(models.Model):
    """A bot pull request moving one repo down a level in upstream's allowlist. The row is what
    the relay wants (`state`); the outbox's demotion sync makes GitHub agree, one call at a time.
    At most one active row (open or closing) per project."""

    class State(models.TextChoices):
        OPEN = "open", "open (the repo misses the demotion criteria)"
        CLOSING = "closing", "closing (the repo is back within target)"
        CLOSED = "closed", "closed by the relay"
        CLOSED_BY_HAND = "closed_by_hand", "closed by a person"
        MERGED = "merged", "merged by a person"

    ACTIVE_STATES = (State.OPEN, State.CLOSING)
    DECIDED_BY = "crcr-demotion-loop"
    """Who decides in the audit: the loop itself (a person's close or merge is recorded as such)."""
    DEMOTED_LEVELS = (Level.L3,)
    """Upstream's loop demotes L3 to L2 only (an L4 backend missing the criteria is a person's
    call); an L3 repo's check runs stop while its demotion PR is open."""

    project = models.ForeignKey("relay.Project", on_delete=models.CASCADE, related_name="demotion_prs")
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    from_level = models.CharField(max_length=2)
    to_level = models.CharField(max_length=2)
    branch = models.CharField(max_length=255)
    number = models.PositiveIntegerField(null=True, blank=True, help_text="the PR's number, once GitHub has it")
    html_url = models.URLField(max_length=500, blank=True)
    evidence = models.JSONField(
        default=dict, encoder=DjangoJSONEncoder, help_text="the level-status entry the body is written from"
    )
    labelled = models.BooleanField(default=False)
    sent_digest = models.CharField(max_length=64, blank=True, help_text="hash of the title and body last sent")
    steps = models.PositiveIntegerField(default=0, help_text="sync calls chained since the last decision")
    replaces = models.OneToOneField(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="replaced_by"
    )
    created_at = models.DateTimeField(default=timezone.now)
    synced_at = models.DateTimeField(null=True, blank=True, help_text="when a sync last compared it with GitHub")
    closed_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["project"],
                condition=Q(state__in=["open", "closing"]),
                name="demotion_pr_one_active_per_project",
            )
        ]

    def __str__(self):
        number = f"#{self.number}" if self.number else "(not opened yet)"
        return f"demote {self.project} {self.from_level}→{self.to_level} {number} ({self.state})"

    @property
    def active(self) -> bool:
        return self.state in self.ACTIVE_STATES


class DemotionDecision(models.Model):
    """The audit log of the demotion loop: what was decided, by whom, on which evidence."""

    class Kind(models.TextChoices):
        OPENED = "opened", "demotion PR opened"
        REFRESHED = "refreshed", "demotion PR refreshed"
        CLOSED_RECOVERED = "closed_recovered", "closed: back within target"
        CLOSED_MOOT = "closed_moot", "closed: the allowlist no longer lists it at that level"
        REOPENED = "reopened", "opened again after a manual close"
        CLOSED_BY_HAND = "closed_by_hand", "closed by a person"
        MERGED = "merged", "merged by a person"
        SKIPPED_NO_DATA = "skipped_no_data", "skipped: no jobs in the window"
        SKIPPED_LEVEL = "skipped_level", "skipped: the loop does not demote this level"
        SUPPRESSED = "suppressed", "new check runs suppressed on an upstream PR"

    project = models.ForeignKey("relay.Project", on_delete=models.CASCADE, related_name="demotion_decisions")
    demotion_pr = models.ForeignKey(
        DemotionPullRequest, on_delete=models.SET_NULL, null=True, blank=True, related_name="decisions"
    )
    kind = models.CharField(max_length=20, choices=Kind.choices)
    decided_by = models.CharField(max_length=150)
    note = models.TextField(blank=True)
    evidence = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    upstream_pr = models.PositiveIntegerField(null=True, blank=True, help_text="suppressed: the upstream PR")
    decided_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-decided_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["demotion_pr", "upstream_pr"],
                condition=Q(kind="suppressed"),
                name="demotion_suppressed_once_per_upstream_pr",
            )
        ]
        indexes = [models.Index(fields=["project", "-decided_at"], name="demotion_decision_project_idx")]

    def __str__(self):
        return f"{self.project}: {self.get_kind_display()}"
