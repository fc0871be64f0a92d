"""Failure causes' figures (issue 54), on the test store at size (devtools/bench/teststore.py):

- clustering one job's 1,000 failed tests in the minute sweep (relay.teststore.causes.causes_sweep,
  after the test store recorded them), each with a message and a stack trace at the callback's
  caps, in the kinds of reason a backend sees (missing operators, mismatches whose numbers
  differ, index errors, device-side asserts); target ≤ 1 s;
- a backend's causes page (`/causes?backend=…&days=90`, rendered in process through Django's
  handler) over 90 days of clustered failures: every stored failure of the test store with its
  cause, a few dozen causes per backend, some of them shared by every backend and the reference
  (the chronic tests: an upstream break), some missing operators shared by several; target
  ≤ 300 ms. The backend page's causes section (7 days) and the API's list beside it, as info.

The callback clusters nothing (tests/relay/causes/test_callback_untouched.py proves it), so the
callback's figures are the callback's figures."""

import time

from django.db import connection, transaction
from django.test import Client
from django.utils import timezone

from relay.models import (
    CauseCommit,
    CauseHit,
    CauseRun,
    CauseTest,
    FailedTest,
    FailureCause,
    JobRun,
    Project,
    TestIdentity,
    TestRun,
    identity_digest,
)
from relay.policy.reasons import VERSION
from relay.teststore.cause_counts import cause_counts_write
from relay.teststore.causes import causes_sweep, clustering_state_set
from relay.teststore.store import commit_record

from .load import median, ms
from .teststore import CHRONIC, PREFIX, thousand_failed, tid_of

TARGETS = {"cluster_ms": 1000.0, "page_ms": 300.0}
SHARED_OPERATORS = 12
"""Missing operators every backend may fail through (a test's operator is the same everywhere)."""
OWN = 30
"""Each backend's own causes (mismatches, index errors, …)."""
DIGEST = "cause-bench-"


def causes(b) -> None:
    """The figures, on the test store seeded by teststore (its backends, commits and failures)."""
    projects = list(Project.objects.filter(full_name__startswith=PREFIX).order_by("id"))
    started = time.monotonic()
    hits = seed(projects)
    b.add(
        "causes_seed",
        f"cluster the store's failures for the page ({hits:,} cause hits)",
        _since(started),
        "s",
        hits=hits,
    )
    backend, reference = projects[0], projects[-1]
    with _the_reference(reference):
        _page_figures(b, backend)
    cluster = [_cluster_thousand(backend, n) for n in range(3)]
    b.add(
        "causes_cluster",
        "clustering a job's 1,000 failed tests in the sweep (the callback: + 0 statements)",
        median(cluster),
        "ms",
        f"≤ {TARGETS['cluster_ms']:.0f} ms",
        median(cluster) <= TARGETS["cluster_ms"],
        samples=cluster,
    )


def _page_figures(b, backend: Project) -> None:
    client = Client()
    paths = {
        "causes_page": (f"/causes?backend={backend.full_name}&days=90", "a backend's causes page, 90 days"),
        "causes_api": (f"/api/v1/causes?backend={backend.full_name}&days=90", "GET /api/v1/causes, a backend, 90 days"),
        "causes_backend_page": (f"/causes?backend={backend.full_name}", "a backend's causes page, 7 days (as linked)"),
    }
    for key, (path, label) in paths.items():
        samples = [_get(client, path) for _ in range(8)][1:]  # the first warms the process's caches
        target = TARGETS["page_ms"] if key == "causes_page" else None
        b.add(
            key,
            label,
            median(samples),
            "ms",
            f"≤ {target:.0f} ms" if target else "",
            None if target is None else median(samples) <= target,
            samples=samples,
        )


def _get(client: Client, path: str) -> float:
    start = time.perf_counter()
    reply = client.get(path)
    took = ms(time.perf_counter() - start)
    if reply.status_code != 200 or b"cause" not in reply.content:
        raise AssertionError(f"{path}: {reply.status_code} {reply.content[:300]!r}")
    return took


class _the_reference:
    """The store's last backend is the reference while the pages are measured (the benchmark
    database's own reference, if the pages' seed made one, steps aside and comes back)."""

    def __init__(self, project: Project):
        self.project, self.others = project, []

    def __enter__(self):
        self.others = list(Project.objects.filter(is_reference=True).values_list("pk", flat=True))
        Project.objects.filter(pk__in=self.others).update(is_reference=False)
        Project.objects.filter(pk=self.project.pk).update(is_reference=True, active=True)

    def __exit__(self, *exc):
        Project.objects.filter(pk=self.project.pk).update(is_reference=False)
        Project.objects.filter(pk__in=self.others).update(is_reference=True)


# --- the store's failures, clustered ---------------------------------------------------------------------


def seed(projects: list[Project]) -> int:
    """Every TestRun of the test store's backends gets a CauseHit (and the counts the sweep keeps
    beside them), in SQL: a chronic test fails through the one upstream cause (every backend, the
    reference too); every third other test through one of the shared missing operators (the same
    one on every backend); the rest through one of its backend's own causes. The sweep's
    watermark then stands past them."""
    now = timezone.now()
    CauseHit.objects.filter(cause__digest__startswith=DIGEST).delete()
    FailureCause.objects.filter(digest__startswith=DIGEST).delete()
    FailureCause.objects.bulk_create(_causes(len(projects), now), batch_size=2000)
    first = min(p.pk for p in projects)
    chronic = TestIdentity.objects.filter(digest__in=[identity_digest(tid_of(n).full) for n in range(CHRONIC)])
    chronic_ids = ", ".join(str(pk) for pk in chronic.values_list("pk", flat=True))
    slot = (
        f"CASE WHEN r.identity_id IN ({chronic_ids}) THEN 0 "
        f"WHEN r.identity_id % 3 = 0 THEN 1 + (r.identity_id / 3) % {SHARED_OPERATORS} "
        f"ELSE {1 + SHARED_OPERATORS} + (r.project_id - {first}) * {OWN} + (r.identity_id / 3) % {OWN} END"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO relay_causehit (cause_id, version, project_id, job_run_id, identity_id, sha, created_at) "
            f"SELECT c.id, {VERSION}, r.project_id, r.job_run_id, r.identity_id, r.sha, r.created_at "
            f"FROM relay_testrun r JOIN relay_failurecause c ON c.digest = '{DIGEST}' || CAST(({slot}) AS TEXT) "
            f"WHERE r.project_id IN ({', '.join(str(p.pk) for p in projects)})"
        )
        hits = cursor.rowcount
    cause_counts_write(VERSION)  # what the sweep keeps beside the hits it writes
    _vacuumed()
    clustering_state_set(**{f"v{VERSION}": TestRun.objects.order_by("-id").values_list("id", flat=True).first() or 0})
    clustering_state_set(complete=VERSION)
    return hits


def _vacuumed() -> None:
    """Statistics, and on PostgreSQL the tables' visibility maps as autovacuum keeps them on an
    append-only table (PostgreSQL ≥ 13 vacuums after inserts): a freshly loaded table has none,
    and every count would read the heap behind its index."""
    with connection.cursor() as cursor:
        if connection.vendor != "postgresql" or connection.in_atomic_block:  # (a test's transaction)
            cursor.execute("ANALYZE")
            return
        for model in (CauseHit, CauseRun, CauseCommit, CauseTest):
            cursor.execute(f"VACUUM (ANALYZE) {model._meta.db_table}")


def _causes(backends: int, now) -> list[FailureCause]:
    """Slot 0: the upstream break; then the shared missing operators; then each backend's own."""
    rows = [
        FailureCause(
            version=VERSION,
            digest=f"{DIGEST}0",
            kind="reason",
            exception="AssertionError",
            signature="Tensor-likes are not close!",
            first_seen_at=now,
            last_seen_at=now,
        )
    ]
    for n in range(SHARED_OPERATORS):
        op = f"aten::_bench_op_{n}"
        rows.append(
            FailureCause(
                version=VERSION,
                digest=f"{DIGEST}{1 + n}",
                kind="missing_operator",
                exception="NotImplementedError",
                signature=op,
                operator=op,
                first_seen_at=now,
                last_seen_at=now,
            )
        )
    for n in range(backends * OWN):
        rows.append(
            FailureCause(
                version=VERSION,
                digest=f"{DIGEST}{1 + SHARED_OPERATORS + n}",
                kind="reason",
                exception="RuntimeError",
                signature=f"bench own cause {n} of <device> <n>",
                first_seen_at=now,
                last_seen_at=now,
            )
        )
    return rows


# --- one job's 1,000 failures, clustered in the sweep -----------------------------------------------------


def _cluster_thousand(project: Project, n: int) -> float:
    """A fresh commit whose one job failed 1,000 tests, recorded by the store (untimed), then the
    causes sweep that clusters exactly those failures (timed)."""
    sha = thousand_failed(project, n + 9_100_000, f"cause-1k-{n}", _failed)
    commit_record(sha, project)
    start = time.perf_counter()
    clustered = causes_sweep()
    took = ms(time.perf_counter() - start)
    if clustered != 1000:
        raise AssertionError(f"the sweep clustered {clustered} failures, not the job's 1,000")
    return took


STACK = (
    'Traceback (most recent call last):\n  File "/opt/conda/lib/python3.12/site-packages/torch/testing/_internal/'
    'common_utils.py", line 3150, in wrapper\n    method(*args, **kwargs)\n'
    '  File "/var/lib/ci/pytorch/test/test_ops.py", line {line}, in test_case\n    self.assertEqual(actual, expected)\n'
)
MESSAGES = (
    "NotImplementedError: Could not run 'aten::_bench_op_{op}' with arguments from the 'PrivateUse1' backend. "
    "This could be because the operator doesn't exist for this backend, or was omitted during the selective/custom "
    "build process (if using custom build). 'aten::_bench_op_{op}' is only available for these backends: "
    "[CPU, CUDA, Meta, BackendSelect, Python, Named, Conjugate, Negative, ZeroTensor, ADInplaceOrView].",
    "AssertionError: Tensor-likes are not close!\n\nMismatched elements: {k} / 4096 (0.{k}%)\n"
    "Greatest absolute difference: 0.00{k} at index (3, {op}) (up to 1e-05 allowed)\n"
    "Greatest relative difference: 0.0{k} at index (3, {op}) (up to 1.3e-06 allowed)",
    "IndexError: index {k} is out of bounds for dimension 0 with size {op}",
    "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, npu:{op} and "
    "cpu! (when checking argument for argument mat2 in method wrapper_CUDA_mm) at 0x7f3a{k:04x}c0 torch.float16",
    "RuntimeError: shape '[{k}, {op}, 64]' is invalid for input of size {k}{op}00 in /var/lib/ci/src/ops/view.cpp:{k}",
)


def _failed(job: JobRun, k: int) -> FailedTest:
    message = MESSAGES[k % len(MESSAGES)].format(k=k, op=k % 7)
    stack = (STACK.format(line=100 + k) * 8)[:4000] + message
    return FailedTest(
        job_run=job,
        classname=f"test_bench_{k % 97}.TestBench{k % 13}CPU",
        name=f"test_case_{k}_cpu_float32",
        message=message[:1024],
        stacktrace=stack[-4096:],
    )


def _since(started: float) -> float:
    return round(time.monotonic() - started, 1)
