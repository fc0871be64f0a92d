"""Test-level truth: one row per upstream test identity, each backend's non-passing outcomes per
upstream commit and attempt, what the store took of each (backend, commit), every (test, backend)'s
flakiness state, and the mutes backends put on tests (with their audit).

Written by relay/teststore/ from the job rows and failed tests the callbacks stored, never in the
callback itself (docs/scaling.md, "The test store"); read through relay/results/tests.py."""

import hashlib

from django.db import connection, models
from django.utils import timezone

from relay.policy.flakiness import HealthState  # the states' one definition
from relay.policy.testids import TestId, id_parts

from .registry import Project
from .results import JobRun, TestOutcome

BATCH = 500


def identity_digest(identity: str) -> str:
    """The store's key for an identity: a fixed-width hash, so the unique index stays narrow
    however long a parametrised name is."""
    return hashlib.sha1(identity.encode("utf-8", errors="replace"), usedforsecurity=False).hexdigest()


def rows_insert(model, rows: list[dict], batch: int = BATCH) -> None:
    """`rows` (attribute → value) inserted where no unique key has them yet, in one prepared
    statement per batch: Django's bulk_create compiles every row's every value, ~0.5 ms a row,
    which made a commit's 1,000 failed tests cost half a second (docs/scaling.md)."""
    if not rows:
        return
    names = list(rows[0])
    fields = [model._meta.get_field(name) for name in names]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    marks = ", ".join(["%s"] * len(names))
    sql = f"INSERT INTO {model._meta.db_table} ({columns}) VALUES ({marks}) ON CONFLICT DO NOTHING"
    prep = [(f, f.get_internal_type() == "DateTimeField") for f in fields]
    values = [
        [connection.ops.adapt_datetimefield_value(v) if is_time else v for (f, is_time), v in zip(prep, row.values())]
        for row in rows
    ]
    with connection.cursor() as cursor:
        for start in range(0, len(values), batch):
            cursor.executemany(sql, values[start : start + batch])


class TestIdentityQuerySet(models.QuerySet):
    def ids_for(self, ids: set[TestId]) -> dict[TestId, int]:
        """The row id of each identity, made where missing (a race ends in the unique digest:
        whoever inserts first, both read the same row)."""
        digests = {identity_digest(tid.full): tid for tid in ids}
        found = self._by_digest(list(digests))
        missing = [d for d in digests if d not in found]
        if missing:
            rows_insert(TestIdentity, [_identity_row(digest, digests[digest]) for digest in missing])
            found.update(self._by_digest(missing))
        return {tid: found[digest] for digest, tid in digests.items()}

    def _by_digest(self, digests: list[str]) -> dict[str, int]:
        found = {}
        for start in range(0, len(digests), BATCH):
            found.update(self.filter(digest__in=digests[start : start + BATCH]).values_list("digest", "id"))
        return found


def _identity_row(digest: str, tid: TestId) -> dict:
    parts = id_parts(tid)
    return {
        "digest": digest,
        "identity": tid.full,
        "module": parts.module[:500],
        "test_class": parts.test_class[:500],
        "method": parts.method[:1000],
        "dtypes": parts.dtypes[:200],
        "params": parts.params[:1000],
        "first_seen_at": timezone.now(),
    }


class TestIdentity(models.Model):
    """One upstream test, device-agnostic: the `test_id` the baseline returns (relay.policy.testids), with
    its parts kept apart: module, class without its device suffix, method without its device word
    and dtype, the dtype tokens, and pytest's bracketed parameters."""

    __test__ = False

    digest = models.CharField(max_length=40, unique=True)
    identity = models.TextField(help_text="module.Class.method_dtype[params], as relay.testids gives it")
    module = models.CharField(max_length=500, blank=True)
    test_class = models.CharField(max_length=500, blank=True)
    method = models.CharField(max_length=1000, help_text="without the device word and the dtype")
    dtypes = models.CharField(max_length=200, blank=True)
    params = models.CharField(max_length=1000, blank=True)
    first_seen_at = models.DateTimeField(default=timezone.now)

    objects = TestIdentityQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "test identities"
        indexes = [models.Index(fields=["method"], name="testidentity_method_idx")]

    def __str__(self):
        return self.identity


class TestRun(models.Model):
    """One test's outcome in one job attempt, for what is not a pass (failed, error, xpassed; and
    xfailed or skipped where a report names them). A pass is inferred where the backend reported
    per-test results on that commit and did not list the test (relay/results/tests.py)."""

    __test__ = False

    identity = models.ForeignKey(TestIdentity, on_delete=models.CASCADE, related_name="runs", db_index=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="test_runs", db_index=False)
    job_run = models.ForeignKey(JobRun, on_delete=models.CASCADE, related_name="test_runs", db_index=False)
    sha = models.CharField(max_length=40)
    attempt = models.PositiveIntegerField(default=1)
    outcome = models.CharField(max_length=8, choices=TestOutcome.choices)
    created_at = models.DateTimeField(help_text="the job attempt's created_at: history order and retention")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job_run", "identity"], name="testrun_once_per_job")]
        indexes = [
            # Identity first: one test's history across backends and commits is one range.
            models.Index(fields=["identity", "project", "created_at"], name="testrun_identity_idx"),
            models.Index(fields=["created_at"], name="testrun_created_idx"),
        ]

    def __str__(self):
        return f"{self.identity_id} {self.outcome} on {self.project_id} @ {self.sha[:10]}.{self.attempt}"


class TestedCommit(models.Model):
    """One backend on one upstream commit, as the store took it: which attempts' tests were
    written, which were stepped through the flakiness machine, and whether the backend reported
    per-test results there (what decides "passed (inferred)" against "unknown")."""

    __test__ = False

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="tested_commits", db_index=False)
    sha = models.CharField(max_length=40)
    recorded_jobs = models.JSONField(default=list, help_text="attempt ids whose failed tests are in TestRun")
    stepped_jobs = models.JSONField(default=list, help_text="attempt ids the flakiness machine has seen")
    per_test = models.BooleanField(default=False, help_text="a finished attempt reported per-test results")
    tests_total = models.PositiveIntegerField(null=True, blank=True, help_text="latest attempts, summed")
    tests_ran = models.PositiveIntegerField(null=True, blank=True, help_text="latest attempts, total minus skipped")
    accelerator_ran = models.PositiveIntegerField(
        null=True, blank=True, help_text="latest attempts' tests run that are classified ACCELERATOR, where reported"
    )
    failing = models.BooleanField(default=False, help_text="a latest attempt failed (the cell reads red)")
    created_at = models.DateTimeField(help_text="the commit's first job attempt here")
    recorded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "sha"], name="testedcommit_once")]
        indexes = [models.Index(fields=["project", "created_at"], name="testedcommit_project_idx")]

    def __str__(self):
        return f"{self.project_id} @ {self.sha[:10]}"


class TestHealth(models.Model):
    """One (test, backend)'s flakiness state (relay/policy/flakiness.py): a row exists once the
    test has failed there; a test without one is healthy."""

    __test__ = False

    identity = models.ForeignKey(TestIdentity, on_delete=models.CASCADE, related_name="health", db_index=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="test_health", db_index=False)
    state = models.CharField(max_length=8, choices=HealthState.choices, default=HealthState.HEALTHY)
    failing_streak = models.PositiveIntegerField(default=0, help_text="consecutive commits it failed on")
    passing_streak = models.PositiveIntegerField(default=0, help_text="consecutive clean passes")
    pass_on_retry = models.PositiveIntegerField(default=0, help_text="retries that passed it after a failure")
    fail_on_retry = models.PositiveIntegerField(default=0, help_text="retries that failed it again")
    flaky_commits = models.PositiveIntegerField(default=0, help_text="commits where it both passed and failed")
    steps = models.PositiveIntegerField(default=0)
    last_sha = models.CharField(max_length=40, blank=True)
    since = models.DateTimeField(default=timezone.now, help_text="when it entered its state")
    since_sha = models.CharField(max_length=40, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["identity", "project"], name="testhealth_once")]
        indexes = [
            # Only what a clean pass can move (relay.teststore.store.OPEN_HEALTH), and the flaky
            # and broken lists: a healthy row with no streak is most rows and in no index here.
            models.Index(
                fields=["project", "state"],
                condition=~models.Q(state="healthy") | models.Q(failing_streak__gt=0),
                name="testhealth_open_idx",
            )
        ]

    def __str__(self):
        return f"{self.identity_id} on {self.project_id}: {self.state}"


class TestMute(models.Model):
    """A backend's quarantine of one test: it still runs and shows, with a *muted* badge, but is
    left out of the backend's pass rate, the merge gate and the demotion criteria until it expires
    or is lifted (relay/triage/mutes.py)."""

    __test__ = False

    identity = models.ForeignKey(TestIdentity, on_delete=models.CASCADE, related_name="mutes")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="test_mutes", db_index=False)
    reason = models.CharField(max_length=500)
    owner = models.CharField(max_length=200, help_text="who answers for it (a person or a team)")
    tracking_issue = models.URLField(max_length=500, blank=True, help_text="the issue that tracks the fix")
    created_by = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    lifted_at = models.DateTimeField(null=True, blank=True)
    lifted_by = models.CharField(max_length=200, blank=True)

    class Meta:
        indexes = [models.Index(fields=["project", "expires_at"], name="testmute_project_idx")]
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.identity} muted on {self.project_id}"

    def active_at(self, when) -> bool:
        return self.lifted_at is None and self.expires_at > when


class TestMuteEvent(models.Model):
    """The audit of mutes: every mute, extension and lift, by whom and when."""

    __test__ = False

    class Action(models.TextChoices):
        MUTED = "muted"
        EXTENDED = "extended"
        LIFTED = "lifted"

    mute = models.ForeignKey(TestMute, on_delete=models.CASCADE, related_name="events")
    action = models.CharField(max_length=8, choices=Action.choices)
    by = models.CharField(max_length=200)
    at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    note = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self):
        return f"{self.mute_id} {self.action} by {self.by}"
