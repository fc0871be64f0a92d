"""Bisection's figures (issue 47): how many dispatches a range of k commits costs, through the real
search (relay.bisect.search) in process against the benchmark database, with a simulated backend
that answers every probe honestly (the test fails from the culprit on). For each k, every culprit
position (a sample of them past 17) is bisected; the figure is the most dispatches any needed,
against ceil(log2 k) + 2. Then: a budget smaller than a search is never exceeded; two backends
bisecting at once never receive each other's probes; a bisection whose worker died mid-search
(its claim left to run out) is resumed by the sweep and still names the culprit."""

import hashlib
import math
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from relay.bisect.search import bisection_advance
from relay.bisect.start import probes_needed
from relay.bisect.tasks import bisections_sweep
from relay.models import BISECT_EVENT, Bisection, BisectProbe, FailedTest, JobRun, Project

PREFIX = "bisect-bench/"
TEST_ID = "test_ops.TestBench.test_add_float32"
RANGES = (2, 3, 5, 12, 17, 64)
SAMPLED = 9
"""Culprit positions tried per k past 17 (the first, the last and evenly between)."""


def _sha(salt: str, n: int) -> str:
    return hashlib.sha1(f"{salt}:{n}".encode()).hexdigest()


def _project(name: str, budget: int = 1000) -> Project:
    project, _ = Project.objects.update_or_create(
        full_name=f"{PREFIX}{name}",
        defaults={"level": "L2", "bisect_enabled": True, "bisect_daily_budget": budget, "active": False},
    )
    return project


def _bisection(project: Project, k: int, salt: str) -> Bisection:
    return Bisection.objects.create(
        project=project,
        good_sha=_sha(salt, 0),
        bad_sha=_sha(salt, k),
        commits=[_sha(salt, n) for n in range(1, k + 1)],
        tests=[{"test_id": TEST_ID, "job": "ci / test"}],
        bad_index=k,
    )


def _answer(probe: BisectProbe, breaks_at: int) -> None:
    fails = probe.index >= breaks_at
    job = JobRun.objects.create(
        project=probe.project,
        dispatch=probe.dispatch,
        delivery_key=probe.dispatch.delivery.guid,
        event_type=BISECT_EVENT,
        run_id=f"bench-{probe.pk}",
        workflow_name="ci",
        job_name="test",
        status=JobRun.Status.COMPLETED,
        conclusion="failure" if fails else "success",
        head_sha=probe.sha,
        tests_total=1,
        tests_failed=int(fails),
    )
    if fails:
        FailedTest.objects.create(job_run=job, name="test_add_float32", classname="test_ops.TestBench")


def _run(bisection: Bisection, breaks_at: int, stall_after: int | None = None) -> Bisection:
    """Answer and advance until it ends; with `stall_after`, a worker dies holding the claim after
    that many probes and the sweep takes over once the claim has run out."""
    bisection_advance(bisection.pk)
    while True:
        bisection.refresh_from_db()
        if not bisection.running:
            return bisection
        for probe in bisection.probes.filter(outcome="").select_related("dispatch__delivery", "project"):
            _answer(probe, breaks_at)
        if stall_after is not None and bisection.probes.count() >= stall_after:
            Bisection.objects.filter(pk=bisection.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
            bisections_sweep()
            stall_after = None
        else:
            bisection_advance(bisection.pk)


def _positions(k: int) -> list[int]:
    if k <= 17:
        return list(range(1, k + 1))
    return sorted({1, k, *(1 + round(i * (k - 1) / (SAMPLED - 1)) for i in range(SAMPLED))})


def bisection(b) -> None:
    """Every figure in one transaction rolled back at the end: the benchmark database keeps none
    of it, and no probe's send is kicked (a kick waits for a commit that never comes)."""
    with transaction.atomic():
        _dispatch_counts(b)
        _budget(b)
        _two_backends(b)
        _restart(b)
        transaction.set_rollback(True)


def _dispatch_counts(b) -> None:
    project = _project("one")
    for k in RANGES:
        worst, wrong = 0, 0
        for breaks_at in _positions(k):
            found = _run(_bisection(project, k, f"{k}-{breaks_at}"), breaks_at)
            worst = max(worst, found.probes.count())
            wrong += found.state != Bisection.State.VERIFIED or found.culprit_sha != found.span[breaks_at]
        needed = math.ceil(math.log2(k)) + 2
        b.add(
            f"bisect_dispatches_k{k}",
            f"dispatches to decide and verify a range of {k} commits (most over {len(_positions(k))} culprit positions)",
            worst,
            "dispatches",
            f"≤ ceil(log2 {k}) + 2 = {needed}, every culprit named",
            worst <= needed == probes_needed(k) and wrong == 0,
            wrong=wrong,
        )


def _budget(b) -> None:
    project = _project("budget", budget=5)
    found = _run(_bisection(project, 64, "budget"), 40)
    spent = BisectProbe.objects.filter(project=project).count()
    b.add(
        "bisect_budget",
        "probes dispatched for a 64-commit search on a daily budget of 5",
        spent,
        "dispatches",
        "≤ 5, the bisection ends over budget",
        spent <= 5 and found.state == Bisection.State.OVER_BUDGET,
    )


def _two_backends(b) -> None:
    first, second = _project("first"), _project("second")
    one, two = _bisection(first, 17, "first"), _bisection(second, 12, "second")
    bisection_advance(one.pk)
    bisection_advance(two.pk)
    one, two = _run(one, 5), _run(two, 9)
    mixed = sum(
        p.dispatch.project_id != found.project_id or p.sha not in found.span
        for found in (one, two)
        for p in found.probes.select_related("dispatch")
    )
    b.add(
        "bisect_isolation",
        "probes of two backends bisecting at once sent to the other backend or outside its range",
        mixed,
        "probes",
        "0",
        mixed == 0 and one.culprit_sha == one.span[5] and two.culprit_sha == two.span[9],
    )


def _restart(b) -> None:
    found = _run(_bisection(_project("restart"), 64, "restart"), 23, stall_after=3)
    b.add(
        "bisect_restart",
        "a 64-commit bisection whose worker died after 3 probes, resumed by the sweep: dispatches",
        found.probes.count(),
        "dispatches",
        "the culprit verified within ceil(log2 64) + 2 = 8",
        found.state == Bisection.State.VERIFIED and found.culprit_sha == found.span[23] and found.probes.count() <= 8,
    )
