"""A small world for test-level reads: the reference and two backends on four trunk commits,
where upstream breaks `TestFoo.test_add_float32` at the third and XPU also flakes `test_mul`."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.teststore.store import store_sweep
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

ADD = "test_ops.TestFoo.test_add_float32"
MUL = "test_ops.TestFoo.test_mul_float32"


def named(device: str, word: str, method: str = "test_add") -> dict:
    return {"classname": f"test_ops.TestFoo{device}", "name": f"{method}_{word}_float32", "file": "test/test_ops.py"}


def ran(project, commit, conclusion="success", failed=(), attempt=1, run_id=None, **fields):
    job = JobRunFactory(
        project=project,
        head_sha=commit.sha,
        conclusion=conclusion,
        run_id=run_id or f"{commit.sha[:6]}{project.pk}",
        run_attempt=attempt,
        tests_total=fields.pop("tests_total", 40),
        tests_failed=len(failed) or None,
        created_at=commit.landed_at + timedelta(minutes=attempt),
        **fields,
    )
    for test in failed:
        FailedTestFactory(job_run=job, **test)
    return job


@pytest.fixture
def world(db):
    start = timezone.now() - timedelta(hours=10)
    reference = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, display_name="OpenReg")
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4", display_name="Intel XPU")
    rocm = ProjectFactory(full_name="ROCm/pytorch", level="L3", display_name="AMD ROCm")
    commits = [UpstreamCommitFactory(landed_at=start + timedelta(hours=n)) for n in range(4)]
    words = {reference: ("PRIVATEUSE1", "openreg"), xpu: ("XPU", "xpu"), rocm: ("CUDA", "cuda")}
    for commit in commits[:2]:
        for project in words:
            ran(project, commit)
    for commit in commits[2:]:
        for project, (device, word) in words.items():
            ran(project, commit, "failure", [named(device, word)])
    # XPU on the newest commit: test_mul fails on the first attempt, passes on the retry.
    ran(xpu, commits[1], "failure", [named("XPU", "xpu", "test_mul")], run_id="flaky", job_name="shard 2")
    ran(xpu, commits[1], "success", attempt=2, run_id="flaky", job_name="shard 2")
    store_sweep()
    return {"reference": reference, "xpu": xpu, "rocm": rocm, "commits": commits}
