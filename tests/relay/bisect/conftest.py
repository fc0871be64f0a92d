"""A backend that bisects, a range of trunk commits, and a simulated downstream that answers each
probe the way a backend's probe workflow would: the test fails on every commit from the culprit
on (or, for a flaky test, only sometimes)."""

import hashlib

import pytest

from relay.bisect.search import bisection_advance
from relay.models import BISECT_EVENT, Bisection, BisectProbe, JobRun
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory

ADD = "test_ops.TestFoo.test_add_float32"
JOB = "ci / test"


def sha_of(n: int, salt: str = "") -> str:
    return hashlib.sha1(f"{salt}commit {n}".encode()).hexdigest()


def failed_add() -> dict:
    return {"classname": "test_ops.TestFooXPU", "name": "test_add_xpu_float32", "file": "test/test_ops.py"}


@pytest.fixture
def xpu(db):
    return ProjectFactory(full_name="intel/torch-xpu-ops", level="L2", bisect_enabled=True, display_name="Intel XPU")


def bisection_of(project, k: int, salt: str = "") -> Bisection:
    """A bisection over k commits after a last pass, as bisection_consider opens one."""
    return Bisection.objects.create(
        project=project,
        good_sha=sha_of(0, salt),
        bad_sha=sha_of(k, salt),
        commits=[sha_of(n, salt) for n in range(1, k + 1)],
        tests=[{"test_id": ADD, "job": JOB}],
        bad_index=k,
        branch="main",
    )


def answer(probe: BisectProbe, fails: bool, **fields) -> JobRun:
    """The job a probe's run reports: the test failing, or every test it ran passing."""
    said = {"conclusion": "failure" if fails else "success", "tests_total": 1, "tests_failed": 1 if fails else 0}
    job = JobRunFactory(
        project=probe.project,
        dispatch=probe.dispatch,
        delivery_key=probe.dispatch.delivery.guid,
        event_type=BISECT_EVENT,
        head_sha=probe.sha,
        **{**said, **fields},
    )
    if fails:
        FailedTestFactory(job_run=job, **failed_add())
    return job


def open_probes(bisection: Bisection) -> list[BisectProbe]:
    return list(bisection.probes.filter(outcome="").select_related("dispatch__delivery", "project"))


def run_to_the_end(bisection: Bisection, breaks_at: int, verdict=None, limit: int = 40) -> Bisection:
    """Advance and answer until the bisection ends; `verdict(probe)` overrides the honest answer."""
    bisection_advance(bisection.pk)
    for _ in range(limit):
        bisection.refresh_from_db()
        if not bisection.running:
            return bisection
        for probe in open_probes(bisection):
            honest = probe.index >= breaks_at
            answer(probe, honest if verdict is None else verdict(probe, honest))
        bisection_advance(bisection.pk)
    raise AssertionError("the bisection did not end")
