"""Writing each job's counts per upstream test module (ModuleCount).

A callback's `workflow.module_counts` is checked where the body is read (relay.callbacks.body:
a bad one is a 400) and stored with the body as before; this module's minute sweep writes the
rows from the stored bodies, so the callback costs what it cost without them (issue 55). The
reference import has its counts in hand and writes them at once (`counts_write`). Modules are
named by the identity rule (relay.policy.testids.module_of), so a backend's `test/test_nn.py` and the
reference's `test_nn.TestNNDeviceTypePRIVATEUSE1` are one module, and several names reaching
one module are summed."""

import logging
from datetime import timedelta

from django.utils import timezone

from relay.callbacks.body import BadCallback, module_counts_read
from relay.models import CountedCommit, JobRun, ModuleCount
from relay.models.teststore import rows_insert
from relay.ops.watermarks import watermark_move, watermark_read
from relay.policy.testids import module_of

logger = logging.getLogger(__name__)
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
WATERMARK_KEY = "module-counts-watermark"
OVERLAP = timedelta(minutes=5)
LOOKBACK = timedelta(hours=30)
"""As the test store's sweep: how long after its row was made a job may still complete."""


def by_module(counts: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """Counts keyed as reported, summed per module of the identity rule."""
    modules: dict[str, dict[str, int]] = {}
    for name, outcomes in counts.items():
        into = modules.setdefault(module_of(name), dict.fromkeys(OUTCOMES, 0))
        for outcome in OUTCOMES:
            into[outcome] += outcomes.get(outcome, 0)
    return modules


def counts_write(job_id: int, project_id: int, sha: str, created_at, counts: dict[str, dict[str, int]]) -> int:
    """One job's counts (keyed as reported) as ModuleCount rows, and its commit as counted for its
    backend (CountedCommit, where the pages find it); rows already there stay (a completed
    attempt's counts do not change). Returns how many modules it counted."""
    modules = by_module(counts)
    rows = [
        {
            "job_run_id": job_id,
            "project_id": project_id,
            "sha": sha,
            "module": module[:300],
            **outcomes,
            "created_at": created_at,
        }
        for module, outcomes in modules.items()
    ]
    rows_insert(ModuleCount, rows)
    if rows:
        rows_insert(CountedCommit, [{"project_id": project_id, "sha": sha, "created_at": created_at}])
    return len(rows)


MAX_PAGES = 10


def counts_sweep(now=None, limit: int = 1000) -> int:
    """The counts of every job completed since the last sweep (plus an overlap) whose stored
    callback body carries them, `limit` jobs a page; past MAX_PAGES pages the watermark moves
    only as far as the last job read, so the next sweep goes on from there. Returns how many
    jobs it wrote."""
    now = now or timezone.now()
    after = (watermark_read(WATERMARK_KEY, now, LOOKBACK, OVERLAP), 0)
    written = 0
    for _ in range(MAX_PAGES):
        rows = _completed_with_counts(after, now, limit)
        written += sum(_job_write(*row) for row in rows)
        if len(rows) < limit:
            watermark_move(WATERMARK_KEY, now)
            return written
        after = (rows[-1][4], rows[-1][0])
    # Cut short: the next sweep starts at the last job read (its read takes OVERLAP off again).
    watermark_move(WATERMARK_KEY, after[0] + OVERLAP)
    return written


def _job_write(job_id: int, project_id: int, sha: str, created_at, _, sent) -> bool:
    try:
        counts = module_counts_read(sent)
    except BadCallback as exc:  # checked when received; a body edited since is skipped, said
        logger.warning("module counts of job %s unreadable: %s", job_id, exc)
        return False
    return bool(counts_write(job_id, project_id, sha, created_at, counts))


def _completed_with_counts(after: tuple, now, limit: int) -> list:
    """(id, project, sha, created_at, updated_at, the body's module_counts) of jobs completed
    after `after` (updated_at, id), in that order, among rows created in the lookback (JobRun's
    created_at index)."""
    changed, last_id = after
    rows = (
        JobRun.objects.filter(created_at__gte=now - LOOKBACK, updated_at__gte=changed, status=JobRun.Status.COMPLETED)
        .exclude(updated_at=changed, id__lte=last_id)
        .filter(body__workflow__has_key="module_counts")
        .exclude(head_sha="")
        .order_by("updated_at", "id")
        .values_list("id", "project_id", "head_sha", "created_at", "updated_at", "body__workflow__module_counts")
    )
    return list(rows[:limit])
