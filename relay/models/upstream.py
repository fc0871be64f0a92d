"""What the relay knows about the upstream repository: its commits and pull requests."""

from django.db import models
from django.utils import timezone


class UpstreamCommit(models.Model):
    """A commit of the upstream repo the relay has heard of: pushed to a branch (trunk when it is
    the default branch) or the head of a PR. The HUD's rows."""

    sha = models.CharField(max_length=40, unique=True)
    title = models.CharField(max_length=300, blank=True)
    author = models.CharField(max_length=100, blank=True)
    committed_at = models.DateTimeField(null=True, blank=True)
    landed_at = models.DateTimeField(
        default=timezone.now, help_text="when the relay saw it pushed (or first saw the PR head)"
    )
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
