"""A small trunk in the shapes real producers send: the OpenReg reference (PyTorch's JUnit,
`test_nn.TestNNDeviceTypePRIVATEUSE1`), Intel XPU (pytest from the checkout's root) and AMD ROCm
(the bare class, file beside it)."""

from datetime import UTC, datetime, timedelta

import pytest

T0 = datetime(2026, 11, 30, 8, tzinfo=UTC)
XPU_ADDMM = {
    "classname": "test.test_ops.TestCommonXPU",
    "name": "test_addmm_xpu_float32",
    "file": "test/test_ops.py",
    "message": "RuntimeError: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY",
}
ROCM_ADDMM = {
    "classname": "TestCommonCUDA",
    "name": "test_addmm_cuda_float32",
    "file": "test/test_ops.py",
    "message": "AssertionError: Tensor-likes are not close!",
}
XPU_SUM = {
    "classname": "test.test_reductions.TestReductionsXPU",
    "name": "test_sum_xpu_float16",
    "file": "test/test_reductions.py",
    "message": "AssertionError: Scalars are not close!",
}


@pytest.fixture(autouse=True)
def own_cache(settings):
    """Each test its own empty cache: windowed tallies cached for the current hour by an earlier
    test (on Redis they outlive the test) would hide this test's results. A private in-memory
    cache, not a flush, because on CI the Redis database is the broker's too."""
    from django.core.cache import cache

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "triage-tests"}
    }
    cache.clear()


@pytest.fixture
def backends(db):
    from relay.models import Project

    return {
        "ref": Project.objects.create(
            full_name="pytorch/openreg-ci",
            level="L2",
            is_reference=True,
            display_name="OpenReg",
            hardware_kind="reference",
        ),
        "xpu": Project.objects.create(
            full_name="intel/torch-xpu-ops", level="L4", display_name="Intel XPU", hardware_kind="gpu"
        ),
        "rocm": Project.objects.create(
            full_name="ROCm/pytorch", level="L3", device="rocm", display_name="AMD ROCm", hardware_kind="gpu"
        ),
    }


@pytest.fixture
def trunk(db):
    return make_trunk(6)


def make_trunk(n: int, start: int = 0) -> list:
    from relay.models import UpstreamCommit

    commits, parent = [], ""
    for i in range(start, start + n):
        commits.append(
            UpstreamCommit.objects.create(
                sha=f"{i + 1:x}" * 40 if i < 15 else f"{i:040x}",
                title=f"Upstream change {i}",
                author="dev",
                is_trunk=True,
                branch="main",
                parent_sha=parent,
                landed_at=T0 + timedelta(hours=i),
            )
        )
        parent = commits[-1].sha
    return commits


def result(
    project, sha, failed=(), conclusion=None, pr_number=None, job="test (default, 1, 1)", workflow="ci", tests_total=500
):
    from relay.models import FailedTest, JobRun

    run = JobRun.objects.create(
        project=project,
        delivery_key=f"{sha[:8]}-{project.pk}-{job}",
        event_type="pull_request" if pr_number else "push",
        run_id=f"{project.pk}{sha[:6]}",
        workflow_name=workflow,
        job_name=job,
        status="completed",
        conclusion=conclusion or ("failure" if failed else "success"),
        head_sha=sha,
        pr_number=pr_number,
        tests_total=tests_total,
        tests_failed=len(failed) or None,
    )
    FailedTest.objects.bulk_create(FailedTest(job_run=run, **t) for t in failed)
    return run
