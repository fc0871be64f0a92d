"""Enablement: each job's test counts per upstream test module, and the admins' mapping of
modules to integration paths (eager ops, autograd, … compile/inductor).

ModuleCount rows (and CountedCommit, one per backend and commit that has them) are written by relay/enablement/ off the callback (the callback only checks
`workflow.module_counts` and stores its body as before) and by the reference import; read
through relay/enablement/."""

from django.db import models

from .registry import Project
from .results import JobRun


class ModuleCount(models.Model):
    """One job attempt's counts for one upstream test module (the identity rule's module, so a
    backend's row and the reference's are one module)."""

    job_run = models.ForeignKey(JobRun, on_delete=models.CASCADE, related_name="module_counts", db_index=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    sha = models.CharField(max_length=40)
    module = models.CharField(max_length=300, blank=True, help_text='"" when the report named no module')
    passed = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    error = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    xfailed = models.PositiveIntegerField(default=0)
    xpassed = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(help_text="the job row's created_at")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job_run", "module"], name="module_count_unique")]
        indexes = [
            models.Index(fields=["created_at"], name="modulecount_created_idx"),  # retention's prune
        ]

    def __str__(self):
        return f"{self.module or '(no module)'} on job {self.job_run_id}"


class CountedCommit(models.Model):
    """A (backend, commit) with ModuleCount rows, written with them: the enablement pages find a
    backend's counted trunk commits here, one row each, instead of reading its ~300 rows per job
    (at 20 backends × 4,500 trunk commits that was 27 M rows to read for one page)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    sha = models.CharField(max_length=40)
    created_at = models.DateTimeField(help_text="the first counted job row's created_at (retention's prune)")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "sha"], name="counted_commit_unique")]
        indexes = [
            # A page of trunk commits asked of every backend at once (the unique index serves one backend's).
            models.Index(fields=["sha", "project"], name="countedcommit_sha_idx"),
            models.Index(fields=["created_at"], name="countedcommit_created_idx"),
        ]

    def __str__(self):
        return f"{self.sha[:7]} counted for {self.project_id}"


class IntegrationPath(models.TextChoices):
    EAGER_OPS = "eager ops"
    AUTOGRAD = "autograd"
    NN = "nn"
    LINALG = "linalg"
    SPARSE = "sparse"
    PROFILER = "profiler"
    DISTRIBUTED = "distributed"
    DYNAMO = "compile/dynamo"
    INDUCTOR = "compile/inductor"
    EXPORT = "export"
    OTHER = "other"


class PathRule(models.Model):
    """A module pattern (RE2, searched in the module's dotted name) and the integration path it
    names; the first rule by position that matches decides. The admins' rules come before the
    defaults shipped with the relay (relay.enablement.paths)."""

    position = models.PositiveIntegerField(default=0)
    pattern = models.CharField(max_length=300, help_text=r"RE2, searched in the module: ^distributed\.")
    path = models.CharField(max_length=32, choices=IntegrationPath.choices)

    class Meta:
        ordering = ["position", "id"]

    def __str__(self):
        return f"{self.pattern} → {self.path}"
