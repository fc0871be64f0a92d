"""Writing the test store from what the callbacks stored: each (backend, upstream commit)'s job
attempts become TestRun rows (one per identity and attempt that did not pass), and, once nothing
there is still running, one step of each concerned test's flakiness state (relay.policy.flakiness).

The callback never writes here: a beat task (`store_sweep`, every minute) takes the commits whose
jobs finished since its last run, so a callback costs exactly what it cost before the store
existed, with or without failed tests (docs/scaling.md, "The test store"). Recording a commit is
idempotent: TestedCommit says which attempts were written and which were stepped, so a sweep that
runs twice, or overlaps the last one, writes and steps nothing twice."""

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from relay import follow_up
from relay.models import (
    FAILING_OUTCOMES,
    HealthState,
    JobRun,
    Level,
    Project,
    TestedCommit,
    TestHealth,
    TestIdentity,
    TestRun,
)
from relay.models.teststore import rows_insert
from relay.ops.watermarks import watermark_move, watermark_read
from relay.policy import flakiness as machine
from relay.policy.testids import TestId, TestIdResolver, report_ids
from relay.policy.verdicts import attempts_in_order
from relay.results.baseline import cell_failures
from relay.results.cells import cells_for_commits, failed_tests_for_jobs, reported_environment
from relay.stats import runkinds

logger = logging.getLogger(__name__)
WATERMARK_KEY = "test-store-watermark"
OVERLAP = timedelta(minutes=5)
LOOKBACK = timedelta(hours=30)
"""How far back a job row may have been created and still finish now: past the results
sweeper's 6 h timeout, and a day of a nightly's lateness."""
BATCH = 500
FAILING = {o.value for o in FAILING_OUTCOMES}
RESULT_CONCLUSIONS = {"success", "failure"}
"""An attempt with one of these and per-test counts ran its tests: not listing a test is a pass."""


@dataclass
class Recorded:
    runs: int = 0
    steps: int = 0
    new: bool = False
    """Something was written or stepped."""


# --- one backend on one commit ----------------------------------------------------------------------


def commit_record(sha: str, project: Project) -> Recorded:
    """Write what is new of `project` on `sha` and step its tests if nothing there still runs."""
    cell = cells_for_commits([sha], [project], detail=True)[(sha, project.id)]
    done = [job for job in cell.jobs if job.status == JobRun.Status.COMPLETED]
    result = Recorded()
    if not done:
        return result
    with transaction.atomic():
        row = _tested_commit_locked(project, sha, min(job.created_at for job in cell.jobs))
        new = [job for job in done if job.id not in set(row.recorded_jobs)]
        if new:
            result.runs = runs_write(project, sha, new)
            row.recorded_jobs = sorted({*row.recorded_jobs, *(job.id for job in new)})
        _cell_facts(row, cell)
        if not cell.pending and set(row.stepped_jobs) != {job.id for job in done}:
            result.steps = health_step(project, sha, cell, set(row.stepped_jobs), done)
            row.stepped_jobs = sorted(job.id for job in done)
            result.new = True
        result.new = result.new or bool(new)
        row.save()
    return result


def _tested_commit_locked(project: Project, sha: str, created_at) -> TestedCommit:
    row, _ = TestedCommit.objects.get_or_create(project=project, sha=sha, defaults={"created_at": created_at})
    return TestedCommit.objects.select_for_update().get(pk=row.pk)


def _cell_facts(row: TestedCommit, cell) -> None:
    """What the pages and the quality figures read of the commit without its jobs: per-test
    results (the baseline's own reading), counts over the latest attempts, red or not."""
    failures = cell_failures(cell, {})
    row.per_test = failures.per_test
    latest = [v.job for v in cell.verdicts]
    totals = [j.tests_total for j in latest if j.tests_total is not None]
    row.tests_total = sum(totals) if totals else None
    row.tests_ran = sum(j.tests_total - (j.tests_skipped or 0) for j in latest if j.tests_total is not None) or (
        0 if totals else None
    )
    accelerator = [j.tests_accelerator_ran for j in latest if j.tests_accelerator_ran is not None]
    row.accelerator_ran = sum(accelerator) if accelerator else None
    row.failing = cell.failing


# --- TestRun rows ---------------------------------------------------------------------------------------


def runs_write(project: Project, sha: str, jobs: list) -> int:
    """The failed tests of these attempts as TestRun rows."""
    rows = job_identities(project, sha, jobs)
    identities = TestIdentity.objects.ids_for({tid for _, tid in rows})
    rows_insert(
        TestRun,
        [
            {
                "identity_id": identities[tid],
                "project_id": project.pk,
                "job_run_id": job_id,
                "sha": sha,
                "attempt": job.run_attempt,
                "outcome": outcome,
                "created_at": job.created_at,
            }
            for (job_id, tid), (job, outcome, _) in rows.items()
        ],
    )
    return len(rows)


def job_identities(
    project: Project, sha: str, jobs: list, reported: dict | None = None
) -> dict[tuple[int, TestId], tuple]:
    """(attempt id, identity) → (attempt, outcome, the failed test as read) of these attempts'
    failed tests, under the identity rule (a module missing filled in from the identities already
    stored on the commit). `reported`: the attempts' failed tests already read (with more fields)."""
    reported = failed_tests_for_jobs([job.id for job in jobs]) if reported is None else reported
    by_job = {
        job.id: report_ids(t, project.device_type, reported_environment(t))
        for job in jobs
        for t in [reported.get(job.id, [])]
    }
    resolve = _resolver(sha, [tid for ids in by_job.values() for tid in ids])
    rows = {}
    for job in jobs:
        for test, tid in zip(reported.get(job.id, []), by_job[job.id], strict=True):
            tid = resolve(tid)
            if tid.key:
                rows.setdefault((job.id, tid), (job, test.get("outcome") or "failed", test))
    return rows


def _resolver(sha: str, ids: list[TestId]):
    if all(tid.module for tid in ids):
        return lambda tid: tid
    stored = (
        TestIdentity.objects.filter(runs__job_run__head_sha=sha).exclude(module="").values_list("module", "identity")
    )
    known = [TestId(module, identity[len(module) + 1 :]) for module, identity in stored.distinct()[:20000]]
    return TestIdResolver([*ids, *known]).resolve


# --- flakiness steps ------------------------------------------------------------------------------------


def health_step(project: Project, sha: str, cell, stepped_before: set[int], done: list) -> int:
    """One step for each test whose word on this commit changed since the last step here: the
    tests some attempt failed, and the flaky, broken or streaking ones (a clean pass moves them)."""
    marks = _failing_marks(done)
    per_test = cell_failures(cell, {}).per_test
    before = [job for job in done if job.id in stepped_before]
    concerned = {identity for failing in marks.values() for identity in failing}
    existing = {row.identity_id: row for row in open_health(project)}
    for start in range(0, len(concerned), BATCH):
        chunk = sorted(concerned)[start : start + BATCH]
        existing.update((r.identity_id, r) for r in TestHealth.objects.filter(project=project, identity_id__in=chunk))
    changed, trunk = [], steps_streaks(sha, done)
    for identity in concerned | set(existing):
        row = existing.get(identity) or TestHealth(identity_id=identity, project=project, since_sha=sha)
        after = machine.observe(_sequences(identity, done, marks), per_test)
        earlier = (
            machine.observe(_sequences(identity, before, marks), per_test) if before else machine.Observation(None)
        )
        if _apply(row, after, earlier, sha, trunk):
            changed.append(row)
    _health_save(changed)
    return len(changed)


def steps_streaks(sha: str, jobs: list) -> bool:
    """Whether these runs step streaks (relay.stats.runkinds, TEST_STREAKS): runs of a commit the relay
    recorded on upstream's trunk, whatever event they name (upstream's own workflows that the
    reference is imported from run on pull_request and on push alike). A PR carries its own
    change, so its plain failures and passes say nothing of the test on trunk and never move a
    failing or clean-pass streak (a PR that breaks a test must not make it read *broken* on every
    page), nor does a nightly on a commit no page places on trunk. Its retries still count, and
    passing and failing on one commit is flaky whatever the code."""
    trunk = runkinds.on_trunk(sha)
    kinds = {runkinds.kind_of(job.event_type, closing=False, trunk=trunk) for job in jobs}
    return any(runkinds.counts(runkinds.Figure.TEST_STREAKS, kind, trunk) for kind in kinds)


def open_health(project: Project):
    """The (test, backend) states a clean pass can move: flaky, broken, or healthy with a failing
    streak (the partial index testhealth_open_idx holds only these)."""
    return TestHealth.objects.filter(project=project).filter(OPEN_HEALTH)


OPEN_HEALTH = ~Q(state=HealthState.HEALTHY) | Q(failing_streak__gt=0)


def _failing_marks(jobs: list) -> dict[int, set[int]]:
    """attempt id → identity ids it failed (failed, error, xpassed)."""
    marks: dict[int, set[int]] = {}
    rows = TestRun.objects.filter(job_run_id__in=[job.id for job in jobs], outcome__in=FAILING)
    rows = rows.values_list("job_run_id", "identity_id")
    for job_id, identity in rows:
        marks.setdefault(job_id, set()).add(identity)
    return marks


def _sequences(identity: int, jobs: list, marks: dict[int, set[int]]) -> list[list[str | None]]:
    """Per job (workflow, name) that failed the test in some attempt: its attempts in order as
    F (failed it), P (ran its tests and did not list it) or None."""
    by_job: dict[tuple, list] = {}
    for job in jobs:
        by_job.setdefault((job.workflow_name, job.job_name), []).append(job)
    sequences = []
    for attempts in by_job.values():
        if any(identity in marks.get(job.id, ()) for job in attempts):
            sequences.append([_mark(identity, job, marks) for job in attempts_in_order(attempts)])
    return sequences


def _mark(identity: int, job, marks: dict[int, set[int]]) -> str | None:
    if identity in marks.get(job.id, ()):
        return machine.FAIL
    ran = job.tests_total is not None and job.conclusion in RESULT_CONCLUSIONS and not job.failed_tests_truncated
    return machine.PASS if ran else None


def _apply(
    row: TestHealth, after: machine.Observation, earlier: machine.Observation, sha: str, trunk: bool = True
) -> bool:
    """Move `row` by what this run added: its new retries counted, and one step when what the
    commit says of the test changed (a commit's failure is counted once, however many shards
    re-run); off trunk only a mixed run steps (steps_streaks). False when nothing changed."""
    if after.outcome is None or after == earlier:
        return False
    health = _health_of(row)
    added = machine.Observation(
        after.outcome, after.pass_on_retry - earlier.pass_on_retry, after.fail_on_retry - earlier.fail_on_retry
    )
    stepping = after.outcome != earlier.outcome and (trunk or after.outcome == machine.MIXED)
    if not stepping and not (added.pass_on_retry or added.fail_on_retry):
        return False
    health = machine.counted(health, added)
    if stepping:
        if after.outcome == machine.PASSED and not health.stepped and row.pk is None:
            return False
        health = machine.step(health, after.outcome, settings.CRCR_TEST_BROKEN_AFTER, settings.CRCR_TEST_HEALED_AFTER)
        row.steps += 1
    if health.state != row.state:
        row.since, row.since_sha = timezone.now(), sha
    for name, value in vars(health).items():
        setattr(row, name, value)
    row.last_sha = sha
    return True


def _health_of(row: TestHealth) -> machine.Health:
    return machine.Health(
        row.state, row.failing_streak, row.passing_streak, row.pass_on_retry, row.fail_on_retry, row.flaky_commits
    )


HEALTH_FIELDS = (*vars(machine.Health()).keys(), "steps", "last_sha", "since", "since_sha", "updated_at")


def _health_save(rows: list[TestHealth]) -> None:
    """New rows inserted and changed ones updated, each kind in one prepared statement per batch."""
    now = timezone.now()
    for row in rows:
        row.updated_at = now
    fields = {name: TestHealth._meta.get_field(name) for name in HEALTH_FIELDS}
    new = [
        {"identity_id": r.identity_id, "project_id": r.project_id, **{n: getattr(r, n) for n in HEALTH_FIELDS}}
        for r in rows
        if r.pk is None
    ]
    rows_insert(TestHealth, new)
    old = [r for r in rows if r.pk is not None]
    if not old:
        return
    sets = ", ".join(f"{connection.ops.quote_name(fields[n].column)} = %s" for n in HEALTH_FIELDS)
    sql = f"UPDATE {TestHealth._meta.db_table} SET {sets} WHERE id = %s"
    values = [[_prepared(fields[n], getattr(r, n)) for n in HEALTH_FIELDS] + [r.pk] for r in old]
    with connection.cursor() as cursor:
        for start in range(0, len(values), BATCH):
            cursor.executemany(sql, values[start : start + BATCH])


def _prepared(field, value):
    return connection.ops.adapt_datetimefield_value(value) if field.get_internal_type() == "DateTimeField" else value


# --- the sweep ----------------------------------------------------------------------------------------


def store_sweep(now=None, limit: int = 2000) -> int:
    """Record every (backend, commit) with an attempt finished since the last sweep (plus an
    overlap); the watermark then moves to `now`. Returns how many commits had something new."""
    now = now or timezone.now()
    changed = 0
    for sha, project in _touched(watermark_read(WATERMARK_KEY, now, LOOKBACK, OVERLAP), now, limit):
        try:
            recorded = commit_record(sha, project)
        except Exception:  # noqa: BLE001 - one commit's trouble must not stall the rest
            logger.exception("test store: recording %s on %s failed", sha[:12], project.full_name)
            continue
        changed += bool(recorded.new)
        if recorded.steps:
            follow_up.tests_stepped(project, sha)
    watermark_move(WATERMARK_KEY, now)
    return changed


def _touched(since, now, limit: int) -> list[tuple[str, Project]]:
    """(sha, project) of attempts completed since `since`, among rows created in the lookback
    (JobRun's created_at index; a completion is an update of an older row)."""
    projects = {p.id: p for p in Project.objects.filter(active=True, is_health_probe=False).exclude(level=Level.L1)}
    rows = (
        JobRun.objects.filter(created_at__gte=now - LOOKBACK, updated_at__gte=since, project_id__in=list(projects))
        .filter(status=JobRun.Status.COMPLETED)
        .exclude(head_sha="")
        .values_list("head_sha", "project_id")
        .distinct()
    )
    return [(sha, projects[pid]) for sha, pid in rows[:limit]]


# --- after a change of the identity rule ----------------------------------------------------------


def store_rematch(write: bool = True) -> tuple[int, int]:
    """(attempts whose stored identities the current rule reads otherwise, backends rebuilt): each
    such attempt's TestRun rows are written again, and each backend concerned has its flakiness
    states replayed from its tested commits in order (`health_rebuild`)."""
    job_ids = sorted(set(TestRun.objects.values_list("job_run_id", flat=True)))
    changed: dict[int, list] = {}
    for start in range(0, len(job_ids), BATCH):
        jobs = JobRun.objects.filter(pk__in=job_ids[start : start + BATCH]).select_related("project")
        stored: dict[int, set[str]] = {}
        for job_id, identity in TestRun.objects.filter(job_run__in=jobs).values_list(
            "job_run_id", "identity__identity"
        ):
            stored.setdefault(job_id, set()).add(identity)
        for job in jobs:
            now = {tid.full for _, tid in job_identities(job.project, job.head_sha, [job])}
            if now != stored.get(job.id, set()):
                changed.setdefault(job.project_id, []).append(job)
    if write:
        for jobs in changed.values():
            with transaction.atomic():
                TestRun.objects.filter(job_run__in=jobs).delete()
                for job in jobs:
                    runs_write(job.project, job.head_sha, [job])
            health_rebuild(jobs[0].project)
    return sum(len(jobs) for jobs in changed.values()), len(changed)


def health_rebuild(project: Project) -> int:
    """The backend's flakiness states replayed from scratch: every tested commit stepped again,
    oldest first (each commit's attempts then count as one run)."""
    TestHealth.objects.filter(project=project).delete()
    commits = list(
        TestedCommit.objects.filter(project=project).order_by("created_at", "id").values_list("sha", flat=True)
    )
    TestedCommit.objects.filter(project=project).update(stepped_jobs=[])
    for sha in commits:
        commit_record(sha, project)
    return len(commits)
