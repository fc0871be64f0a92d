"""Bisections: a backend's new failure searched over the upstream commits it spans, one
repository_dispatch (a probe) per commit tried, then the culprit and its parent re-run to verify.

The state lives in these rows (relay/bisect/ moves it), so a worker that dies mid-search leaves
nothing but a lease that runs out: the next sweep claims the row and goes on where it was."""

from django.db import models
from django.utils import timezone
from django.utils.functional import cached_property

from .deliveries import BISECT_EVENT, Dispatch
from .registry import LevelChange, Project

__all__ = ["BISECT_EVENT", "BisectProbe", "Bisection"]


class BisectionQuerySet(models.QuerySet):
    def running(self):
        return self.filter(state__in=Bisection.RUNNING)


class Bisection(models.Model):
    """One search: `commits` are the first-parent commits after the last pass (`good_sha`, not
    among them) up to the failing commit (`bad_sha`, the last), oldest first. The search keeps
    `good_index` (a commit known to pass; 0 is good_sha itself) and `bad_index` (one known to fail)
    into [good_sha, *commits]; when they are neighbours, bad_index names the culprit."""

    class State(models.TextChoices):
        SEARCHING = "searching"
        VERIFYING = "verifying"
        VERIFIED = "verified", "verified culprit"
        NOT_REPRODUCIBLE = "not_reproducible", "not reproducible"
        TIMED_OUT = "timed_out", "timed out"
        OVER_BUDGET = "over_budget", "over the daily budget"
        INCONCLUSIVE = "inconclusive"

    RUNNING = (State.SEARCHING, State.VERIFYING)

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="bisections")
    state = models.CharField(max_length=20, choices=State.choices, default=State.SEARCHING)
    good_sha = models.CharField(max_length=40, help_text="the last commit the tests passed on")
    bad_sha = models.CharField(max_length=40, help_text="the commit they first failed on, as far as results tell")
    branch = models.CharField(max_length=255, blank=True)
    commits = models.JSONField(default=list, help_text="first-parent SHAs after good_sha up to bad_sha, oldest first")
    tests = models.JSONField(default=list, help_text='[{"test_id": …, "job": …}]: the tests that went red together')
    good_index = models.PositiveIntegerField(default=0)
    bad_index = models.PositiveIntegerField(default=0)
    culprit_sha = models.CharField(max_length=40, blank=True, db_index=True)
    note = models.CharField(max_length=500, blank=True, help_text="why it ended as it did")
    lease_expires_at = models.DateTimeField(null=True, blank=True, help_text="held by the worker moving it")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = BisectionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # At most one bisection running per backend: a probe budget and a runner pool are the
            # backend's, and two searches at once would race for both.
            models.UniqueConstraint(
                fields=["project"],
                condition=models.Q(state__in=["searching", "verifying"]),
                name="bisection_one_running",
            ),
        ]

    def __str__(self):
        return f"bisection {self.pk} of {self.project} ({self.state})"

    @property
    def span(self) -> list[str]:
        """[good_sha, *commits]: what the indexes point into."""
        return [self.good_sha, *self.commits]

    @property
    def running(self) -> bool:
        return self.state in self.RUNNING

    @cached_property
    def level(self) -> str:
        """The backend's level when the bisection ended (now, while it runs): whose word a culprit
        is, and whether upstream takes it, is decided by the level its probes ran at, not today's."""
        changes = LevelChange.objects.filter(project_id=self.project_id) if self.finished_at else []
        return level_when(self.project.level, self.finished_at, changes)


def level_when(current: str, when, changes) -> str:
    """A project's level at `when` from its level changes: the last one made by then, else the
    level the first one after it left; `current` when none says (or `when` is None: now)."""
    if when is None:
        return current
    ordered = sorted(changes, key=lambda c: (c.changed_at, c.id))
    before = [c for c in ordered if c.changed_at <= when]
    if before:
        return before[-1].to_level
    after = next((c for c in ordered if c.changed_at > when), None)
    return (after.from_level if after is not None else "") or current


def levels_prime(bisections) -> None:
    """Each ended bisection's `level` in one query for them all (a page lists several)."""
    ended = [b for b in bisections if b.finished_at is not None and "level" not in b.__dict__]
    changes: dict[int, list] = {}
    for change in LevelChange.objects.filter(project_id__in={b.project_id for b in ended}):
        changes.setdefault(change.project_id, []).append(change)
    for b in ended:
        b.__dict__["level"] = level_when(b.project.level, b.finished_at, changes.get(b.project_id, []))


class BisectProbe(models.Model):
    """One dispatch of a bisection: a commit tried during the search, or one of the two
    verification re-runs (the culprit, expected to fail; its parent, expected to pass)."""

    class Role(models.TextChoices):
        SEARCH = "search"
        CULPRIT = "culprit", "culprit re-run"
        PARENT = "parent", "parent re-run"

    class Outcome(models.TextChoices):
        PENDING = "", "pending"
        FAIL = "fail", "failed (the tests fail there)"
        PASS = "pass", "passed"
        TIMED_OUT = "timed_out", "timed out (no answer)"
        ERROR = "error", "no verdict (the run reported nothing about the tests)"
        UNDELIVERABLE = "undeliverable", "could not be dispatched"

    bisection = models.ForeignKey(Bisection, on_delete=models.CASCADE, related_name="probes")
    number = models.PositiveIntegerField()
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.SEARCH)
    sha = models.CharField(max_length=40)
    index = models.PositiveIntegerField(help_text="where sha is in the bisection's span")
    dispatch = models.OneToOneField(Dispatch, on_delete=models.SET_NULL, null=True, blank=True, related_name="probe")
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="bisect_probes", help_text="the budget is counted per project"
    )
    outcome = models.CharField(max_length=16, choices=Outcome.choices, blank=True, default=Outcome.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["bisection", "number"]
        constraints = [models.UniqueConstraint(fields=["bisection", "number"], name="bisect_probe_number_unique")]
        indexes = [models.Index(fields=["project", "created_at"], name="bisect_probe_budget_idx")]

    def __str__(self):
        return f"probe {self.number} of bisection {self.bisection_id} on {self.sha[:10]} ({self.outcome or 'pending'})"
