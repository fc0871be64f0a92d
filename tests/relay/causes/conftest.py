"""A world failing through a few causes: a missing operator on two backends, an upstream
assertion the reference shares, and one backend's own numerical mismatch."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.teststore.causes import causes_sweep
from relay.teststore.store import store_sweep
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

FFT = (
    "NotImplementedError: Could not run 'aten::_fft_c2c' with arguments from the '{key}' backend. This could be "
    "because the operator doesn't exist for this backend, or was omitted during the selective/custom build "
    "process (if using custom build). 'aten::_fft_c2c' is only available for these backends: [CPU, CUDA, Meta]."
)
SHARED = "IndexError: index {n} is out of bounds for dimension 0 with size 2\n\nTo execute this test, run the following"
CLOSE = (
    "AssertionError: Tensor-likes are not close!\n\nMismatched elements: {n} / 64 (4.7%)\n"
    "Greatest absolute difference: 0.0{n} at index (3, 1) (up to 1e-05 allowed)"
)


def failing(device: str, word: str, method: str, message: str, dtype: str = "float32") -> dict:
    return {
        "classname": f"test_ops.TestCommon{device}",
        "name": f"{method}_{word}_{dtype}",
        "file": "test/test_ops.py",
        "message": message,
    }


def ran(project, commit, failed=(), attempt=1, run_id=None):
    job = JobRunFactory(
        project=project,
        head_sha=commit.sha,
        conclusion="failure" if failed else "success",
        run_id=run_id or f"{commit.sha[:6]}{project.pk}",
        run_attempt=attempt,
        tests_total=100,
        tests_failed=len(failed) or None,
        event_type="push",
        created_at=commit.landed_at + timedelta(minutes=attempt),
    )
    for test in failed:
        FailedTestFactory(job_run=job, **test)
    return job


def xpu_failures(n: int) -> list[dict]:
    fft = [failing("XPU", "xpu", f"test_fft_{i}", FFT.format(key="XPU")) for i in range(3)]
    own = [failing("XPU", "xpu", f"test_conv_{i}", CLOSE.format(n=i + 2)) for i in range(2)]
    return [*fft, *own, failing("XPU", "xpu", "test_index", SHARED.format(n=n))]


@pytest.fixture
def world(db):
    return world_build()


def world_build() -> dict:
    """Three trunk commits; XPU fails 3 tests through a missing operator, 2 through its own
    mismatch and 1 through the assertion the reference shares; Ascend NPU 2 through the same
    missing operator."""
    start = timezone.now() - timedelta(hours=10)
    reference = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, display_name="OpenReg", level="L2")
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4", display_name="Intel XPU", device_type="xpu")
    npu = ProjectFactory(full_name="Ascend/pytorch", level="L2", display_name="Ascend NPU", device_type="npu")
    commits = [UpstreamCommitFactory(landed_at=start + timedelta(hours=n), is_trunk=True) for n in range(3)]
    for n, commit in enumerate(commits):
        ran(xpu, commit, xpu_failures(n + 5))
        ran(
            npu,
            commit,
            [failing("PrivateUse1", "npu", f"test_fft_{i}", FFT.format(key="PrivateUse1")) for i in range(2)],
        )
        ran(reference, commit, [failing("PrivateUse1", "openreg", "test_index", SHARED.format(n=n + 5))])
    store_sweep()
    causes_sweep()
    return {"reference": reference, "xpu": xpu, "npu": npu, "commits": commits}
