"""Facts the relay keeps: the registry of downstream projects, the App's installations, webhook
deliveries and the dispatches they fan out to (each attempt a row)."""

from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from .models_checks import OncallComment, UpstreamCheckRun, UpstreamWrite, UpstreamWriteAttempt
from .models_triage import (
    Expectation, IssueOccurrence, KnownIssue, Notification, NotificationAttempt, NotificationEvent, Subscription,
)
from .outbox.models import OutboxAttempt, OutboxRow

# The upstream-write models live in their own module and name these models by string
# ("relay.Project"), so the import runs one way only; they are re-exported for Django and callers.
__all__ = [
    "CIProvider", "Conclusion", "Delivery", "Dispatch", "DispatchAttempt", "FailedTest", "HardwareKind", "Installation",
    "InstalledRepo", "JobRun", "Level", "LevelChange", "OncallComment", "Project", "PullRequest", "RelayState", "RerunRequest",
    "UpstreamCheckRun", "UpstreamCommit", "UpstreamWrite", "UpstreamWriteAttempt", "UsedToken",
    # Triage and notifications (relay/models_triage.py, the same one-way import).
    "Expectation", "IssueOccurrence", "KnownIssue", "Notification", "NotificationAttempt", "NotificationEvent", "Subscription",
]


class Level(models.TextChoices):
    L1 = "L1", "L1 · dispatch only"
    L2 = "L2", "L2 · results on the HUD"
    L3 = "L3", "L3 · check run with ciflow/crcr/<device>"
    L4 = "L4", "L4 · check run on every PR, merge-blocking"


class CIProvider(models.TextChoices):
    GITHUB = "github", "GitHub Actions"
    BUILDKITE = "buildkite", "Buildkite"
    GITLAB = "gitlab", "GitLab CI"


class Event(models.TextChoices):
    """What a downstream repo takes part in (allowlist `events`, test-infra #8855): PR and push
    dispatch with their results and check runs, and its own nightly reports."""

    PULL_REQUEST = "pull_request", "pull requests and pushes"
    NIGHTLY = "nightly", "nightly runs"


class HardwareKind(models.TextChoices):
    REFERENCE = "reference", "Reference (CPU-backed)"
    GPU = "gpu", "GPU"
    NPU = "npu", "NPU / AI accelerator"
    CPU = "cpu", "CPU"
    ECOSYSTEM = "ecosystem", "Ecosystem library"
    PROBE = "probe", "Relay health probe"
    OTHER = "other", "Other"


class ProjectQuerySet(models.QuerySet):
    def dispatch_targets(self):
        """Who an upstream event is relayed to: every active project but a reference that does
        not report through callbacks (its results are imported from upstream CI)."""
        return self.filter(active=True).exclude(is_reference=True, reference_reports=False)


class Project(models.Model):
    """A downstream repository registered with the relay (one allowlist entry)."""

    objects = ProjectQuerySet.as_manager()

    full_name = models.CharField(max_length=140, help_text="owner/repo on GitHub")
    github_repo_id = models.BigIntegerField(null=True, blank=True, unique=True, help_text="GitHub's numeric repository id, when known; OIDC identity is pinned to it")
    level = models.CharField(max_length=2, choices=Level.choices, default=Level.L1)
    device = models.CharField(max_length=60, blank=True, help_text="L3 label suffix: ciflow/crcr/<device>")
    oncalls = models.JSONField(default=list, blank=True, help_text="GitHub handles pinged on failures")
    events = models.JSONField(
        default=list, blank=True,
        help_text='What it takes part in, as the allowlist says: ["pull_request"], ["nightly"] or both; empty: both (the allowlist default)',
    )
    ci_provider = models.CharField(max_length=16, choices=CIProvider.choices, default=CIProvider.GITHUB)
    hardware_kind = models.CharField(max_length=16, choices=HardwareKind.choices, default=HardwareKind.OTHER)
    display_name = models.CharField(max_length=80, blank=True)
    is_reference = models.BooleanField(default=False, help_text="The baseline (OpenReg): a source of results, not a backend")
    reference_reports = models.BooleanField(
        default=False,
        help_text="The reference also reports its own runs through /github/callback, so the relay dispatches to it; "
        "otherwise its results come only from the upstream import and it is never dispatched to",
    )
    is_health_probe = models.BooleanField(default=False, help_text="Relay self-test repo; kept out of product aggregates")
    active = models.BooleanField(default=True)
    position = models.PositiveIntegerField(default=0, help_text="Order within its level in allowlist.yml")
    require_callback_token = models.BooleanField(null=True, blank=True, help_text="Empty: required at L3 and L4")
    rate_limit_per_min = models.PositiveIntegerField(null=True, blank=True, help_text="Empty: the default (100/min)")
    buildkite_pipeline = models.CharField(
        max_length=80, blank=True, help_text="Buildkite identity: <organization_id>/<pipeline_id> (UUIDs; slugs can be re-claimed)"
    )
    gitlab_project_id = models.CharField(max_length=40, blank=True, help_text="GitLab identity: numeric project id")
    gitlab_project_path = models.CharField(max_length=200, blank=True, help_text="GitLab identity: group/project path")
    oidc_required_claims = models.JSONField(
        default=dict, blank=True, help_text='Claims a callback token must carry, e.g. {"build_branch": ["main"]}'
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["level", "position", "full_name"]
        constraints = [
            models.UniqueConstraint(Lower("full_name"), name="project_full_name_ci_unique"),
            models.CheckConstraint(condition=~models.Q(level="L3") | ~models.Q(device=""), name="project_l3_has_device"),
        ]

    def __str__(self):
        return self.full_name

    @property
    def owner(self) -> str:
        return self.full_name.split("/", 1)[0]

    @property
    def name(self) -> str:
        return self.full_name.split("/", 1)[1]

    @property
    def label(self) -> str:
        return self.display_name or self.full_name

    def takes_part_in(self, event: str) -> bool:
        """An empty `events` is the allowlist's absent key: both."""
        return not self.events or event in self.events

    @property
    def takes_pull_requests(self) -> bool:
        return self.takes_part_in(Event.PULL_REQUEST)

    @property
    def nightly_only(self) -> bool:
        return not self.takes_pull_requests


class LevelChange(models.Model):
    """Audit history: every change of a project's level (and its creation at a level)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="level_changes")
    from_level = models.CharField(max_length=2, choices=Level.choices, blank=True)
    to_level = models.CharField(max_length=2, choices=Level.choices)
    changed_by = models.CharField(max_length=150)
    reason = models.TextField(blank=True)
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-changed_at", "-id"]

    def __str__(self):
        return f"{self.project}: {self.from_level or '—'} → {self.to_level}"


class Installation(models.Model):
    """A GitHub App installation, kept current from installation events and a periodic sync."""

    installation_id = models.BigIntegerField(unique=True)
    account_login = models.CharField(max_length=100, blank=True)
    repository_selection = models.CharField(max_length=16, blank=True)
    suspended = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"{self.account_login} ({self.installation_id})"


class InstalledRepo(models.Model):
    """A repository the App can act on, through its installation."""

    full_name = models.CharField(max_length=140)
    repo_id = models.BigIntegerField(null=True, blank=True)
    installation = models.ForeignKey(Installation, on_delete=models.CASCADE, related_name="repos")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(Lower("full_name"), name="installed_repo_name_ci_unique")]

    def __str__(self):
        return self.full_name


class RelayState(models.Model):
    """Small named facts, e.g. when the installed-repo set was last synced in full."""

    key = models.CharField(max_length=64, primary_key=True)
    value = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)


class Delivery(models.Model):
    """One webhook delivery from GitHub, deduplicated on X-GitHub-Delivery."""

    class Outcome(models.TextChoices):
        RELAYED = "relayed", "relayed to downstream"
        RECORDED = "recorded", "recorded"
        IGNORED = "ignored", "ignored"

    delivery_id = models.CharField(max_length=100, unique=True)
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
    payload_pruned_at = models.DateTimeField(null=True, blank=True, help_text="when retention cut the stored payload to what the relay still reads")
    received_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-received_at", "-id"]
        verbose_name_plural = "deliveries"
        permissions = [("redispatch_delivery", "Can re-dispatch a delivery to downstream repos")]

    def __str__(self):
        return f"{self.event}.{self.action or '-'} {self.delivery_id}"


class Dispatch(OutboxRow):
    """One repository_dispatch of a delivery to one downstream project, sent through the outbox
    engine (relay.outbox; relay.dispatching says how to send one)."""

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
    attempts_before_resend = models.PositiveIntegerField(default=0, help_text="attempts made before the last re-dispatch (its retry budget starts after them)")

    class Meta:
        ordering = ["project__full_name"]
        verbose_name_plural = "dispatches"
        constraints = [models.UniqueConstraint(fields=["delivery", "project"], name="dispatch_once_per_project")]
        indexes = [
            models.Index(fields=["state", "next_attempt_at"], name="dispatch_due_idx"),
            models.Index(fields=["pr_number", "state"], name="dispatch_pr_state_idx"),
        ]

    def __str__(self):
        return f"{self.delivery.delivery_id} → {self.project} ({self.state})"


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

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="job_runs")
    dispatch = models.ForeignKey(Dispatch, on_delete=models.SET_NULL, null=True, blank=True, related_name="job_runs")
    delivery_key = models.CharField(max_length=100, help_text="X-GitHub-Delivery of the dispatch; for a nightly/periodic self-report its delivery_id (the SHA tested, or a reporter's per-job key such as buildkite-<build>-<job id>)")
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
    failed_tests_truncated = models.BooleanField(default=False)
    environment = models.JSONField(default=dict, blank=True)
    body = models.JSONField(default=dict, blank=True, help_text="the last accepted callback body, as sent")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["delivery_key", "project", "run_id", "run_attempt", "job_name"], name="job_run_key_unique"),
        ]
        indexes = [
            models.Index(fields=["head_sha", "project"], name="jobrun_sha_project_idx"),
            models.Index(fields=["project", "created_at"], name="jobrun_project_created_idx"),
            models.Index(fields=["pr_number", "head_sha"], name="jobrun_pr_idx"),
            models.Index(fields=["status", "in_progress_at"], name="jobrun_open_idx"),
            models.Index(fields=["created_at"], name="jobrun_created_idx"),
        ]

    def __str__(self):
        return f"{self.project} {self.workflow_name}/{self.job_name} #{self.run_id}.{self.run_attempt} {self.status}"


class FailedTest(models.Model):
    job_run = models.ForeignKey(JobRun, on_delete=models.CASCADE, related_name="failed_tests")
    name = models.CharField(max_length=1000)
    classname = models.CharField(max_length=1000, blank=True)
    file = models.CharField(max_length=1000, blank=True)
    message = models.TextField(blank=True)
    stacktrace = models.TextField(blank=True)
    hw_classification = models.CharField(max_length=32, blank=True)
    truncated = models.BooleanField(default=False)

    class Meta:
        ordering = ["id"]


class UsedToken(models.Model):
    """An OIDC token's jti, remembered until it expires so it cannot be used twice."""

    issuer = models.CharField(max_length=300)
    jti = models.CharField(max_length=200)
    expires_at = models.DateTimeField(db_index=True)
    used_for = models.CharField(max_length=600, help_text="the job key and status it was used for")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "jti"], name="used_token_unique")]


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


class UpstreamCommit(models.Model):
    """A commit of the upstream repo the relay has heard of: pushed to a branch (trunk when it is
    the default branch) or the head of a PR. The HUD's rows."""

    sha = models.CharField(max_length=40, unique=True)
    title = models.CharField(max_length=300, blank=True)
    author = models.CharField(max_length=100, blank=True)
    committed_at = models.DateTimeField(null=True, blank=True)
    landed_at = models.DateTimeField(default=timezone.now, help_text="when the relay saw it pushed (or first saw the PR head)")
    branch = models.CharField(max_length=255, blank=True)
    is_trunk = models.BooleanField(default=False)
    pr_number = models.PositiveIntegerField(null=True, blank=True)
    parent_sha = models.CharField(max_length=40, blank=True, help_text="first parent, when known")

    class Meta:
        indexes = [
            models.Index(fields=["is_trunk", "-landed_at"], name="commit_trunk_landed_idx"),
            models.Index(fields=["pr_number", "-landed_at"], name="commit_pr_landed_idx"),
        ]

    def __str__(self):
        return f"{self.sha[:10]} {self.title[:40]}"


class PullRequest(models.Model):
    """What the relay last heard of an upstream PR: who opened it, its labels (the
    `ciflow/crcr/<device>` ones decide L3 dispatch) and the base it would merge into."""

    number = models.PositiveIntegerField(unique=True)
    title = models.CharField(max_length=300, blank=True)
    author = models.CharField(max_length=100, blank=True)
    labels = models.JSONField(default=list, blank=True)
    base_sha = models.CharField(max_length=40, blank=True)
    base_ref = models.CharField(max_length=255, blank=True)
    head_sha = models.CharField(max_length=40, blank=True)
    state = models.CharField(max_length=16, blank=True, help_text="open, closed or merged")
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"#{self.number} {self.title[:40]}"

