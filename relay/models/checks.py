"""What the relay writes on the upstream PR: the check runs it keeps (by head SHA and name, with
GitHub's id so every later write updates in place), one oncall comment per (PR, downstream repo),
and the outbox of intended writes with one attempt row per try.

relay/models/__init__.py imports this module (so Django sees these as relay models); this module names
the models it points at by string, so the import runs one way only."""

from django.db import models
from django.db.models import Q
from django.utils import timezone

from ..outbox.models import OutboxAttempt, OutboxRow


class UpstreamCheckRun(models.Model):
    """One check run on an upstream head SHA. The row exists before GitHub's does; `github_id`
    arrives with the create, and from then on every change is a PATCH of that id."""

    class Kind(models.TextChoices):
        BACKEND = "backend", "backend expected (crcr/<owner>/<repo>)"
        JOB = "job", "downstream job"
        GATE = "gate", "merge gate (crcr/gate)"

    kind = models.CharField(max_length=8, choices=Kind.choices)
    name = models.CharField(max_length=500)
    head_sha = models.CharField(max_length=40)
    pr_number = models.PositiveIntegerField(db_index=True)
    project = models.ForeignKey(
        "relay.Project", on_delete=models.CASCADE, null=True, blank=True, related_name="upstream_check_runs"
    )
    workflow_name = models.CharField(max_length=255, blank=True)
    job_name = models.CharField(max_length=255, blank=True)
    run_id = models.CharField(
        max_length=100, blank=True, help_text="the downstream run the check run shows now (re-runs go there)"
    )
    github_id = models.BigIntegerField(null=True, blank=True, unique=True)
    check_suite_id = models.BigIntegerField(null=True, blank=True)
    withdrawn = models.BooleanField(default=False, help_text="its ciflow/crcr label was removed: completed as neutral")
    last_status = models.CharField(max_length=16, blank=True, help_text="as last sent to GitHub")
    last_conclusion = models.CharField(max_length=16, blank=True)
    sent_digest = models.CharField(
        max_length=64, blank=True, help_text="hash of the last body sent: unchanged bodies are not re-sent"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["head_sha", "name"], name="upstream_check_run_once_per_sha")]
        indexes = [models.Index(fields=["pr_number", "project"], name="ucr_pr_project_idx")]

    def __str__(self):
        return f"{self.name} @ {self.head_sha[:10]}"


class OncallComment(models.Model):
    """The one PR comment per (PR, downstream repo) that pings the repo's oncalls; the unique row
    (not a search of the PR's comments) is what makes concurrent failures edit one comment."""

    class State(models.TextChoices):
        NONE = "", "not posted"
        FAILING = "failing"
        RECOVERED = "recovered"

    pr_number = models.PositiveIntegerField()
    project = models.ForeignKey("relay.Project", on_delete=models.CASCADE, related_name="oncall_comments")
    comment_id = models.BigIntegerField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, blank=True, default="")
    pinged_head_sha = models.CharField(
        max_length=40, blank=True, help_text="the head whose failure last pinged the oncalls"
    )
    sent_digest = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["pr_number", "project"], name="oncall_comment_once_per_pr_repo")]

    def __str__(self):
        return f"#{self.pr_number} oncall comment for {self.project}"


class UpstreamWrite(OutboxRow):
    """One intended write upstream. The body is computed when it is sent, from the rows as they
    are then, so a retry always sends the latest truth. At most one unsent and one sending row per
    target: a newer change supersedes the unsent one, and writes to one target never overlap.
    Sent through the outbox engine (relay.outbox; relay.checks.outbox says how to send one)."""

    class Kind(models.TextChoices):
        CHECK_RUN_CREATE = "check_run_create", "create check run"
        CHECK_RUN_UPDATE = "check_run_update", "update check run"
        COMMENT_CREATE = "comment_create", "create comment"
        COMMENT_UPDATE = "comment_update", "update comment"
        RERUN = "rerun", "re-run downstream run"
        SUITE_RERUN = "suite_rerun", "re-run a check suite's downstream runs"
        DEMOTION_SYNC = "demotion_sync", "sync a demotion pull request"
        CAUSE_ISSUE = "cause_issue", "open, update or close a failure cause's issue"

    class State(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SENT = "sent"
        RETRYING = "retrying"
        FAILED = "failed"
        SUPERSEDED = "superseded"

    UNSENT_STATES = (State.PENDING, State.RETRYING)

    kind = models.CharField(max_length=20, choices=Kind.choices)
    target_key = models.CharField(
        max_length=64,
        help_text="what is written: check_run:<pk>, comment:<pk>, rerun:<pk>, suite:<delivery pk>, demotion:<pk>, cause-issue:<pk>",
    )
    target_label = models.CharField(max_length=600, blank=True)
    check_run = models.ForeignKey(
        UpstreamCheckRun, on_delete=models.CASCADE, null=True, blank=True, related_name="writes"
    )
    comment = models.ForeignKey(OncallComment, on_delete=models.CASCADE, null=True, blank=True, related_name="writes")
    rerun = models.ForeignKey(
        "relay.RerunRequest", on_delete=models.CASCADE, null=True, blank=True, related_name="writes"
    )
    delivery = models.ForeignKey(
        "relay.Delivery", on_delete=models.CASCADE, null=True, blank=True, related_name="upstream_writes"
    )
    demotion = models.ForeignKey(
        "relay.DemotionPullRequest", on_delete=models.CASCADE, null=True, blank=True, related_name="writes"
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    note = models.CharField(max_length=300, blank=True, help_text="what the last attempt did")

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["target_key"],
                condition=Q(state__in=["pending", "retrying"]),
                name="upstream_write_one_unsent_per_target",
            ),
            models.UniqueConstraint(
                fields=["target_key"], condition=Q(state="sending"), name="upstream_write_one_sending_per_target"
            ),
        ]
        indexes = [models.Index(fields=["state", "next_attempt_at"], name="upstream_write_due_idx")]

    def __str__(self):
        return f"{self.kind} {self.target_label or self.target_key} ({self.state})"


class UpstreamWriteAttempt(OutboxAttempt):
    """Every try at an upstream write leaves one of these."""

    class Outcome(models.TextChoices):
        SENT = "sent"
        SKIPPED = "skipped", "nothing to send"
        TRANSIENT = "transient", "transient failure"
        PERMANENT = "permanent", "permanent failure"

    write = models.ForeignKey(UpstreamWrite, on_delete=models.CASCADE, related_name="attempt_log")
    method = models.CharField(max_length=8, blank=True)
    path = models.CharField(max_length=500, blank=True)
    outcome = models.CharField(max_length=16, choices=Outcome.choices)

    class Meta(OutboxAttempt.Meta):
        constraints = [models.UniqueConstraint(fields=["write", "number"], name="upstream_write_attempt_number_unique")]
