"""Failure causes: each stored failure's reason cluster (relay/policy/reasons.py), under the
version of the algorithm that made it.

A `FailureCause` is one cluster of one version; a `CauseHit` puts one failed test of one job
attempt (a TestRun row: its job and identity) in one cluster. Both are written by the test
store's minute sweep (relay/teststore/causes.py), never by the callback; a new version's rows are
written beside the old ones, and the old ones are deleted once every stored failure has a hit
under the new version (until then the pages read the old, complete version)."""

from django.db import models
from django.utils import timezone

from relay.models.teststore import TestIdentity
from relay.policy.reasons import rule_text

from .registry import Project
from .results import JobRun


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
        """Its name in a known issue's cause rule (relay.policy.reasons.rule_text)."""
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


# --- what the lists count, kept beside the hits (relay/teststore/cause_counts.py) ---------------------------------
# A list of causes over a window counts, per cause, distinct tests, commits and runs; over 90 days
# of a backend's hits that is a quarter of a million rows sorted three ways. These rows make each
# count exact and cheap: a job's hits share its created_at, so a run is in a window or not; a test
# (or commit) fails through a cause in a window exactly when its latest hit there is in it.


class CauseRun(models.Model):
    """One job attempt's failures through one cause: the runs, failures and latest failure a
    list counts, one row per (cause, attempt) instead of one per failed test."""

    cause = models.ForeignKey(FailureCause, on_delete=models.CASCADE, related_name="+", db_index=False)
    version = models.PositiveSmallIntegerField()
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    job_run = models.ForeignKey(JobRun, on_delete=models.CASCADE, related_name="+", db_index=False)
    sha = models.CharField(max_length=40)
    created_at = models.DateTimeField(help_text="the job attempt's created_at (every hit of it has it)")
    failures = models.PositiveIntegerField(help_text="its failed tests through the cause")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "cause", "job_run"], name="causerun_once")]
        indexes = [
            # cause and failures as key columns too: a backend's counts read the index alone (SQLite
            # has no INCLUDE, and it covers there as well)
            models.Index(fields=["project", "version", "created_at", "cause", "failures"], name="causerun_project_idx"),
            models.Index(fields=["version", "created_at"], name="causerun_time_idx"),
            models.Index(fields=["cause", "project", "created_at"], name="causerun_cause_idx"),
        ]

    def __str__(self):
        return f"{self.cause_id}: {self.failures} on job {self.job_run_id}"


class CauseCommit(models.Model):
    """A commit a backend failed through one cause, and when it last did: a list's commits."""

    cause = models.ForeignKey(FailureCause, on_delete=models.CASCADE, related_name="+", db_index=False)
    version = models.PositiveSmallIntegerField()
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    sha = models.CharField(max_length=40)
    last_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "cause", "project", "sha"], name="causecommit_once")]
        indexes = [
            models.Index(fields=["project", "version", "last_at", "cause"], name="causecommit_project_idx"),
            models.Index(fields=["version", "last_at"], name="causecommit_time_idx"),
        ]

    def __str__(self):
        return f"{self.cause_id}: {self.project_id} @ {self.sha[:10]}"


class CauseTest(models.Model):
    """A test a backend failed through one cause, and when it last did: a list's tests, its
    backends and the reference's share."""

    __test__ = False

    cause = models.ForeignKey(FailureCause, on_delete=models.CASCADE, related_name="+", db_index=False)
    version = models.PositiveSmallIntegerField()
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    identity = models.ForeignKey(TestIdentity, on_delete=models.CASCADE, related_name="+", db_index=False)
    last_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["version", "cause", "project", "identity"], name="causetest_once")
        ]
        indexes = [
            models.Index(fields=["project", "version", "last_at"], name="causetest_project_idx"),
            models.Index(fields=["version", "last_at"], name="causetest_time_idx"),
        ]

    def __str__(self):
        return f"{self.cause_id}: {self.identity_id} on {self.project_id}"


class CauseIssuePolicy(models.Model):
    """A backend's opt-in to issues filed in its repository for the causes that matter, and its
    thresholds: a cause opens an issue when it fails on `open_trunk_commits` trunk commits or
    `open_tests` tests within `window_days`; an open one closes once it has not failed on trunk
    for `close_after_days` days in a row (the lower threshold, so an issue never flaps)."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="cause_issue_policy")
    enabled = models.BooleanField(default=False, help_text="file issues for this backend's causes")
    open_trunk_commits = models.PositiveSmallIntegerField(default=3)
    open_tests = models.PositiveIntegerField(default=20)
    window_days = models.PositiveSmallIntegerField(default=7)
    close_after_days = models.PositiveSmallIntegerField(default=3)

    class Meta:
        verbose_name_plural = "cause issue policies"

    def __str__(self):
        return f"{self.project}: {'on' if self.enabled else 'off'}"


class CauseIssue(models.Model):
    """The issue filed for one cause in one backend's repository, keyed by the cause's rule (which
    outlives a re-clustering); GitHub's number once it exists. `state` is what the issue should
    read on GitHub; the outbox write (relay/checks/cause_issues.py) makes it so."""

    class State(models.TextChoices):
        OPEN = "open"
        CLOSED = "closed"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="cause_issues")
    rule = models.CharField(max_length=520)
    cause = models.ForeignKey(FailureCause, on_delete=models.SET_NULL, null=True, blank=True, related_name="issues")
    label = models.CharField(max_length=520, help_text="the cause as shown, when last seen")
    number = models.PositiveIntegerField(null=True, blank=True, help_text="GitHub's issue number")
    html_url = models.URLField(max_length=500, blank=True)
    state = models.CharField(max_length=8, choices=State.choices, default=State.OPEN)
    tests = models.PositiveIntegerField(default=0, help_text="tests failing through it in the window, last counted")
    trunk_commits = models.PositiveIntegerField(default=0)
    first_sha = models.CharField(max_length=40, blank=True, help_text="its first failing trunk commit")
    reference_tests = models.PositiveIntegerField(default=0)
    opened_at = models.DateTimeField(default=timezone.now)
    closed_at = models.DateTimeField(null=True, blank=True)
    below_since = models.DateTimeField(null=True, blank=True, help_text="off trunk since, while open")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "rule"], name="causeissue_once_per_rule")]

    def __str__(self):
        return f"{self.project}: {self.label} ({self.state})"
