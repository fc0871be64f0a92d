"""The issue's answer on real producers' reports: on a commit where upstream broke device-generic
tests, /api/v1/commits/<sha>/baseline reads them *shared* on the OpenReg reference and on backends
of every device shape (XPU; ROCm's CUDA; two PrivateUse1 backends with their own names; MPS), and
a test only one backend fails as *backend-only*. Reports from tests/fixtures/pytorch-reports."""

from pathlib import Path

import pytest

from relay.models import UpstreamCommit
from relay.reference.junit import junit_parse
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory

pytestmark = pytest.mark.django_db
REPORTS = Path(__file__).parents[1] / "fixtures" / "pytorch-reports"
SHA = "d" * 40
UPSTREAM_BREAKS = {
    "test_device_generic.TestDeviceGeneric." + m
    for m in (
        "test_binary_op_sub_float32",
        "test_mul_overflow_float32",
        "test_npu_format_cast",
        "test_index_error",
        "test_fixed_upstream",
    )
}
BACKENDS = [
    # (repo, device folder, report shape, registry device_type, environment.device)
    ("intel/torch-xpu-ops", "xpu", "pytest-root.xml", "", "xpu"),
    ("ROCm/pytorch", "cuda", "unittest/TEST-TestDeviceGenericCUDA.xml", "", "rocm"),
    ("Ascend/pytorch", "npu", "unittest/TEST-TestDeviceGenericPRIVATEUSE1.xml", "npu", ""),
    ("torch-spyre/torch-spyre", "spyre", "pytest-test-dir.xml", "", ""),
    ("pytorch-mps/mps-ci", "mps", "pytest-test-dir.xml", "", "mps"),
]


def report_job(project, device: str, shape: str, environment: dict, extra=()):
    report = junit_parse((REPORTS / device / shape).read_bytes())
    generic = [t for t in report.failed_tests if "TestDeviceGeneric" in t.classname and "CPU" not in t.classname]
    job = JobRunFactory(
        project=project, head_sha=SHA, conclusion="failure", tests_total=report.total, environment=environment
    )
    for test in [*generic, *extra]:
        FailedTestFactory(job_run=job, name=test.name, classname=test.classname, file=test.file)
    return job


@pytest.fixture
def commit(db):
    UpstreamCommit.objects.create(sha=SHA, title="Break the binary ops")
    reference = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, level="L2")
    report_job(reference, "openreg", "pytest-test-dir.xml", {})
    for repo, device, shape, device_type, env_device in BACKENDS:
        project = ProjectFactory(full_name=repo, level="L2", device_type=device_type)
        # test_add passes on the reference: failing on Spyre alone, it is Spyre's own regression
        extra = [SpyreOnly] if device == "spyre" else []
        report_job(project, device, shape, {"device": env_device}, extra)


class SpyreOnly:
    name, classname, file = "test_add_spyre_float32", "test_device_generic.TestDeviceGenericPRIVATEUSE1", ""


def test_upstream_breaks_read_shared_on_every_device_shape(api, commit):
    body = api.get(f"/api/v1/commits/{SHA}/baseline").json()
    assert {t["test_id"] for t in body["reference_failures"]} == UPSTREAM_BREAKS
    for repo, *_ in BACKENDS:
        backend = next(b for b in body["backends"] if b["full_name"] == repo)
        assert {t["test_id"] for t in backend["shared"]} == UPSTREAM_BREAKS, repo
        assert backend["not_comparable"] == [], repo


def test_a_test_only_one_backend_fails_reads_backend_only(api, commit):
    body = api.get(f"/api/v1/commits/{SHA}/baseline").json()
    spyre = next(b for b in body["backends"] if b["full_name"] == "torch-spyre/torch-spyre")
    assert [t["test_id"] for t in spyre["backend_only"]] == ["test_device_generic.TestDeviceGeneric.test_add_float32"]
    assert spyre["mark"] == "mixed"
    others = [b for b in body["backends"] if b["full_name"] != "torch-spyre/torch-spyre"]
    assert all(b["backend_only"] == [] and b["mark"] == "shared" for b in others)
