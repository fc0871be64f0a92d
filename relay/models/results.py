"""What downstream CI reported back: job runs and their failed tests, the callback tokens already
used, and re-runs asked for upstream."""

from django.db import models
from django.utils import timezone

from .deliveries import BISECT_EVENT, Delivery, Dispatch
from .registry import Project
from .upstream import UpstreamCommit

NEVER_STARTED_RUN_ID = "-"
"""run_id of the row that stands for a dispatch no run ever answered (callbacks cannot use it)."""


MAX_FAILED_TESTS = 1000
"""The most failed tests one callback lists: the upstream callback action's cap (RFC-0054), which the
relay applies too. A list this long may have been cut, so it never shows every failure
(relay.results.excused.listed_completely)."""

SELF_REPORT_EVENTS = ("nightly", "periodic")
"""Event types a downstream reports on its own, with no dispatch behind them (its nightly and
periodic runs); every other event type answers a dispatch."""


class JobRunQuerySet(models.QuerySet):
    def results_for(self, shas):
        """Every attempt that counts as a result for these commits, on every page, the API and the
        gate alike. Two kinds of row are about something else: a nightly/periodic self-report on
        a SHA that is not a trunk commit (it shows on trunk only), and a job answering the
        dispatch of a PR's closing (a clean-up, not a test of the head). A bisection's probe
        runs only the tests asked about: its jobs are the bisection's, not the commit's."""
        trunk = UpstreamCommit.objects.filter(sha__in=shas, is_trunk=True).values("sha")
        closings = Delivery.objects.closings().filter(head_sha__in=shas).values("pk")
        return (
            self.filter(head_sha__in=shas)
            .exclude(models.Q(event_type__in=SELF_REPORT_EVENTS) & ~models.Q(head_sha__in=trunk))
            .exclude(dispatch__delivery_id__in=closings)
            .exclude(event_type=BISECT_EVENT)
        )

    def self_reports(self):
        return self.filter(event_type__in=SELF_REPORT_EVENTS)

    def answering_dispatches(self):
        return self.exclude(event_type__in=SELF_REPORT_EVENTS)


class Conclusion(models.TextChoices):
    """GitHub's check-run conclusions, the only ones a callback may report."""

    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    TIMED_OUT = "timed_out"
    ACTION_REQUIRED = "action_required"
    STALE = "stale"


class JobRun(models.Model):
    """One attempt of one downstream job, keyed (delivery, repo, run id, attempt, job name) and
    moved dispatched → in_progress → completed by callbacks (or finished by the sweeper)."""

    class Status(models.TextChoices):
        IN_PROGRESS = "in_progress", "in progress"
        COMPLETED = "completed"

    class EndedBy(models.TextChoices):
        CALLBACK = "", "callback"
        TIMED_OUT = "timed_out", "timed out (no completion)"
        NEVER_STARTED = "never_started", "never started"
        SUPERSEDED = "superseded", "superseded by a newer head"
        UPSTREAM_IMPORT = "imported", "imported from upstream CI"

    class TestsSource(models.TextChoices):
        """Where the per-test results came from; the reference import (relay.reference.reports)
        looks in S3, then GitHub artifacts, then the job's log."""

        CALLBACK = "", "callback"
        S3 = "s3", "S3 test reports"
        ARTIFACT = "artifact", "GitHub artifact"
        LOG = "log", "job log"

    # No index of its own: (project, created_at) below serves every lookup by project, and each
    # index is one more write on every callback.
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="job_runs", db_index=False)
    dispatch = models.ForeignKey(Dispatch, on_delete=models.SET_NULL, null=True, blank=True, related_name="job_runs")
    delivery_key = models.CharField(
        max_length=100,
        help_text="X-GitHub-Delivery of the dispatch; for a nightly/periodic self-report its delivery_id (the SHA tested, or a reporter's per-job key such as buildkite-<build>-<job id>)",
    )
    event_type = models.CharField(max_length=32, default="pull_request")
    run_id = models.CharField(max_length=100)
    run_attempt = models.PositiveIntegerField(default=1)
    job_name = models.CharField(max_length=255, blank=True)
    workflow_name = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=Status.choices)
    conclusion = models.CharField(max_length=16, choices=Conclusion.choices, blank=True)
    ended_by = models.CharField(max_length=16, choices=EndedBy.choices, blank=True, default="")
    head_sha = models.CharField(max_length=40, blank=True)
    pr_number = models.PositiveIntegerField(null=True, blank=True)
    workflow_url = models.URLField(max_length=1000, blank=True)
    artifact_url = models.URLField(max_length=1000, blank=True)
    check_run_id = models.CharField(max_length=100, blank=True)
    job_id = models.CharField(
        max_length=100, blank=True, default="", help_text="workflow.job_id: the CI's own id of the job, when sent"
    )
    reported_started_at = models.DateTimeField(null=True, blank=True)
    reported_completed_at = models.DateTimeField(null=True, blank=True)
    in_progress_at = models.DateTimeField(null=True, blank=True, help_text="relay clock")
    completed_at = models.DateTimeField(null=True, blank=True, help_text="relay clock")
    start_unknown = models.BooleanField(default=False, help_text="completed arrived with no in_progress before it")
    queue_seconds = models.FloatField(null=True, blank=True)
    execution_seconds = models.FloatField(null=True, blank=True)
    tests_passed = models.PositiveIntegerField(null=True, blank=True)
    tests_failed = models.PositiveIntegerField(null=True, blank=True)
    tests_skipped = models.PositiveIntegerField(null=True, blank=True)
    tests_total = models.PositiveIntegerField(null=True, blank=True)
    tests_error = models.PositiveIntegerField(null=True, blank=True, help_text="tests that errored (JUnit <error>)")
    tests_xfailed = models.PositiveIntegerField(null=True, blank=True, help_text="expected failures")
    tests_xpassed = models.PositiveIntegerField(null=True, blank=True, help_text="unexpected successes")
    tests_accelerator_ran = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="tests run (not skipped) that the report classifies ACCELERATOR (hw_classification)",
    )
    failed_tests_truncated = models.BooleanField(default=False)
    tests_source = models.CharField(max_length=16, choices=TestsSource.choices, blank=True, default="")
    environment = models.JSONField(default=dict, blank=True)
    triage_verdict = models.JSONField(
        null=True, blank=True, help_text="the downstream's advisory triage verdict on this attempt, normalised"
    )
    body = models.JSONField(default=dict, blank=True, help_text="the last accepted callback body, as sent")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    objects = JobRunQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["delivery_key", "project", "run_id", "run_attempt", "job_name"], name="job_run_key_unique"
            ),
        ]
        indexes = [
            models.Index(fields=["head_sha", "project"], name="jobrun_sha_project_idx"),
            models.Index(fields=["project", "created_at"], name="jobrun_project_created_idx"),
            models.Index(fields=["pr_number", "head_sha"], name="jobrun_pr_idx"),
            # Only running jobs (the sweeper's and the overdue marks' question): a completion
            # leaves this index instead of adding to it.
            models.Index(
                fields=["in_progress_at"], condition=models.Q(status="in_progress"), name="jobrun_running_idx"
            ),
            models.Index(fields=["created_at"], name="jobrun_created_idx"),
            # Only the sweeper's "never started" rows: a callback's new row asks whether its
            # dispatch has one (relay/callbacks/job_rows.py: NEVER_STARTED_ROW), which through the
            # dispatch index read every job row of that dispatch.
            models.Index(
                fields=["dispatch"], condition=models.Q(ended_by="never_started"), name="jobrun_never_started_idx"
            ),
        ]

    def __str__(self):
        return f"{self.project} {self.workflow_name}/{self.job_name} #{self.run_id}.{self.run_attempt} {self.status}"


class TestOutcome(models.TextChoices):
    """What producers report per test (pytest, unittest, JUnit). Rows are kept for the three
    that make a run red; passed, skipped and xfailed tests are counted on the job only."""

    __test__ = False

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    XFAILED = "xfailed", "expected failure"
    XPASSED = "xpassed", "unexpected success"


FAILING_OUTCOMES = (TestOutcome.FAILED, TestOutcome.ERROR, TestOutcome.XPASSED)


class FailedTest(models.Model):
    """One failing test of one attempt: every attempt keeps its own (a retry never overwrites)."""

    job_run = models.ForeignKey(JobRun, on_delete=models.CASCADE, related_name="failed_tests")
    outcome = models.CharField(
        max_length=8,
        choices=[(o.value, o.label) for o in FAILING_OUTCOMES],
        default=TestOutcome.FAILED,
    )
    name = models.CharField(max_length=1000)
    classname = models.CharField(max_length=1000, blank=True)
    file = models.CharField(max_length=1000, blank=True)
    message = models.TextField(blank=True)
    stacktrace = models.TextField(blank=True)
    hw_classification = models.CharField(max_length=32, blank=True)
    truncated = models.BooleanField(default=False)

    class Meta:
        ordering = ["id"]

    def __str__(self):
        return f"{self.classname}.{self.name}" if self.classname else self.name


class UsedToken(models.Model):
    """An OIDC token's jti, remembered until it expires so it cannot be used twice."""

    issuer = models.CharField(max_length=300)
    jti = models.CharField(max_length=200)
    expires_at = models.DateTimeField(db_index=True)
    used_for = models.CharField(max_length=600, help_text="the job key and status it was used for")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "jti"], name="used_token_unique")]

    def __str__(self):
        return f"{self.issuer} {self.jti}"


class RerunRequest(models.Model):
    """The relay asked GitHub to re-run a downstream run (from a check-run or check-suite
    re-run request upstream); the re-run attempt's queue time is measured from here."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="rerun_requests")
    run_id = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=[("failed", "failed jobs"), ("all", "all jobs")])
    requested_at = models.DateTimeField(default=timezone.now)
    delivery = models.ForeignKey(Delivery, on_delete=models.SET_NULL, null=True, blank=True)
    outcome = models.CharField(max_length=32, blank=True)

    class Meta:
        indexes = [models.Index(fields=["project", "run_id"], name="rerun_project_run_idx")]

    def __str__(self):
        return f"{self.project} run {self.run_id} ({self.kind})"
