"""Failure causes: each stored failure's reason cluster (relay/causes/reasons.py), under the
version of the algorithm that made it.

A `FailureCause` is one cluster of one version; a `CauseHit` puts one failed test of one job
attempt (a TestRun row: its job and identity) in one cluster. Both are written by the test
store's minute sweep (relay/causes/sweep.py), never by the callback; a new version's rows are
written beside the old ones, and the old ones are deleted once every stored failure has a hit
under the new version (until then the pages read the old, complete version)."""

from django.db import models
from django.utils import timezone

from relay.causes.reasons import rule_text

from .registry import Project
from .results import JobRun
from .testlevel import TestIdentity


class FailureCause(models.Model):
    class Kind(models.TextChoices):
        REASON = "reason", "reason"
        MISSING_OPERATOR = "missing_operator", "missing operator"

    version = models.PositiveSmallIntegerField()
    digest = models.CharField(max_length=40, unique=True, help_text="the reason's key under its version")
    kind = models.CharField(max_length=16, choices=Kind.choices)
    exception = models.CharField(max_length=200, blank=True)
    signature = models.CharField(max_length=300, help_text="the normalised line; the operator for a missing one")
    operator = models.CharField(max_length=200, blank=True)
    example = models.CharField(max_length=300, blank=True, help_text="one line as read, before normalising")
    first_seen_at = models.DateTimeField(default=timezone.now, help_text="the earliest failing job attempt's")
    last_seen_at = models.DateTimeField(default=timezone.now, help_text="the latest failing job attempt's")

    class Meta:
        indexes = [
            models.Index(fields=["version", "kind", "-last_seen_at"], name="cause_version_kind_idx"),
            models.Index(fields=["operator"], condition=~models.Q(operator=""), name="cause_operator_idx"),
        ]

    def __str__(self):
        return self.rule

    @property
    def rule(self) -> str:
        """Its name in a known issue's cause rule (relay.causes.reasons.rule_text)."""
        return rule_text(self.exception, self.signature)

    @property
    def label(self) -> str:
        return f"missing operator {self.operator}" if self.kind == self.Kind.MISSING_OPERATOR else self.rule


class CauseHit(models.Model):
    """One failed test of one job attempt in one cluster; project, commit and time copied from
    the attempt so a backend's or a commit's causes are one index range."""

    cause = models.ForeignKey(FailureCause, on_delete=models.CASCADE, related_name="hits", db_index=False)
    version = models.PositiveSmallIntegerField()
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="cause_hits", db_index=False)
    job_run = models.ForeignKey(JobRun, on_delete=models.CASCADE, related_name="cause_hits", db_index=False)
    identity = models.ForeignKey(TestIdentity, on_delete=models.CASCADE, related_name="cause_hits", db_index=False)
    sha = models.CharField(max_length=40)
    created_at = models.DateTimeField(help_text="the job attempt's created_at")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["version", "job_run", "identity"], name="causehit_once_per_version")
        ]
        indexes = [
            models.Index(fields=["cause", "created_at"], name="causehit_cause_idx"),
            models.Index(fields=["project", "version", "created_at"], name="causehit_project_idx"),
            models.Index(fields=["sha", "version"], name="causehit_sha_idx"),
        ]

    def __str__(self):
        return f"{self.cause_id}: {self.identity_id} on {self.project_id} @ {self.sha[:10]}"
