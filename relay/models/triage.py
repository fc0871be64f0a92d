"""Triage: known issues (a failure we already know about, with its tracker link), where they were
seen, and the expected failures and flaky tests each backend publishes. Who hears about what is
relay/models/notify.py.

relay/models/__init__.py imports this module (so Django sees these as relay models); this module names
the models it points at by string, so the import runs one way only."""

from django.db import models
from django.utils import timezone

MAX_PATTERNS = 20
MAX_PATTERN_CHARS = 200
MAX_MESSAGE_CHARS = 200
MAX_CAUSE_CHARS = 520
"""A cause rule: `Type: normalised line` (relay.policy.reasons.rule_text), at most 200 + 300."""


class KnownIssue(models.Model):
    """A failure the maintainers know about. Its matchers are normalised test-id globs
    (relay.policy.testids identities: `module.Class.method`, or `Class.method` for any module), a
    failure-message substring and/or a failure cause (relay/policy/reasons.py); all given must hold."""

    class Kind(models.TextChoices):
        PRODUCT = "product", "product bug (the backend)"
        UPSTREAM = "upstream", "upstream bug (PyTorch)"
        INFRA = "infra", "infrastructure"
        FLAKY = "flaky", "intermittent failure"

    class State(models.TextChoices):
        OPEN = "open"
        RESOLVED = "resolved"

    title = models.CharField(max_length=200)
    url = models.URLField(max_length=500, blank=True, help_text="the tracker issue")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.PRODUCT)
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN, db_index=True)
    all_backends = models.BooleanField(default=True, help_text="off: only the backends chosen below")
    projects = models.ManyToManyField("relay.Project", blank=True, related_name="known_issues")
    test_patterns = models.JSONField(
        default=list, blank=True, help_text=f"up to {MAX_PATTERNS} globs over normalised test ids"
    )
    message_contains = models.CharField(
        max_length=MAX_MESSAGE_CHARS, blank=True, help_text="a plain substring of the failure message"
    )
    cause = models.CharField(
        max_length=MAX_CAUSE_CHARS,
        blank=True,
        help_text="a failure cause as its page names it (Type: normalised line): failures with that reason",
    )
    blocks_gate = models.BooleanField(
        default=True, help_text="off: failures it matches do not block crcr/gate (admins only)"
    )
    created_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"#{self.pk} {self.title}"


class IssueOccurrence(models.Model):
    """One failed test (or failing job without a test) that matched a known issue, recorded when
    the result arrived (or when the issue was created, for recent results)."""

    issue = models.ForeignKey(KnownIssue, on_delete=models.CASCADE, related_name="occurrences")
    job_run = models.ForeignKey("relay.JobRun", on_delete=models.CASCADE, related_name="issue_occurrences")
    project = models.ForeignKey("relay.Project", on_delete=models.CASCADE, related_name="issue_occurrences")
    head_sha = models.CharField(max_length=40)
    test_id = models.CharField(max_length=1000)
    seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-seen_at", "-id"]
        constraints = [models.UniqueConstraint(fields=["issue", "job_run", "test_id"], name="issue_occurrence_once")]
        indexes = [models.Index(fields=["issue", "-seen_at"], name="occurrence_issue_seen_idx")]

    def __str__(self):
        return f"{self.issue_id}: {self.test_id} on {self.head_sha[:10]}"


class Expectation(models.Model):
    """One line of a backend's published expectations: a test-id glob it expects to fail, or to
    be flaky. The whole list is replaced at once by an upload."""

    class Kind(models.TextChoices):
        FAIL = "fail", "expected failure"
        FLAKY = "flaky", "intermittent (expected)"

    project = models.ForeignKey("relay.Project", on_delete=models.CASCADE, related_name="expectations")
    pattern = models.CharField(max_length=MAX_PATTERN_CHARS)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    reason = models.CharField(max_length=300, blank=True)
    line = models.PositiveIntegerField(default=0)
    uploaded_at = models.DateTimeField(default=timezone.now)
    uploaded_by = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["project", "line", "id"]
        constraints = [models.UniqueConstraint(fields=["project", "pattern"], name="expectation_once_per_pattern")]

    def __str__(self):
        return f"{self.project}: {self.pattern} ({self.kind})"


__all__ = ["KnownIssue", "IssueOccurrence", "Expectation"]
