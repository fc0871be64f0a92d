"""Re-matching stored failed tests under the identity rule for any PrivateUse1 backend and every
device type PyTorch knows (a CPU backend's `TestFooCPU` too)."""

import pytest
from django.core.management import call_command

from relay.models.triage import IssueOccurrence, KnownIssue
from relay.teststore.rematch import old_test_id, rematch
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory

pytestmark = pytest.mark.django_db
GENERIC = "test_ops.TestCommonPRIVATEUSE1"


@pytest.fixture
def stored(db):
    ascend = ProjectFactory(full_name="Ascend/pytorch", device_type="npu")
    npu_job = JobRunFactory(project=ascend, conclusion="failure")
    FailedTestFactory(job_run=npu_job, name="test_add_npu_float32", classname=GENERIC)
    FailedTestFactory(job_run=npu_job, name="test_npu_format_cast_npu", classname=GENERIC)
    spyre_job = JobRunFactory(project=ProjectFactory(full_name="torch-spyre/torch-spyre"), conclusion="failure")
    FailedTestFactory(job_run=spyre_job, name="test_add_spyre_float32", classname=GENERIC)
    reference_job = JobRunFactory(project=ProjectFactory(full_name="pytorch/openreg-ci"), conclusion="failure")
    FailedTestFactory(job_run=reference_job, name="test_add_openreg_float32", classname=GENERIC)
    xpu_job = JobRunFactory(project=ProjectFactory(full_name="intel/torch-xpu-ops"), conclusion="failure")
    FailedTestFactory(job_run=xpu_job, name="test_add_xpu_float32", classname="test_ops.TestCommonXPU")
    riscv_job = JobRunFactory(project=ProjectFactory(full_name="riscv/pytorch-riscv-ci"), conclusion="failure")
    FailedTestFactory(job_run=riscv_job, name="test_add_cpu_float32", classname="test_ops.TestCommonCPU")
    issue = KnownIssue.objects.create(title="add is broken", test_patterns=["*test_add*"])
    IssueOccurrence.objects.create(
        issue=issue,
        job_run=npu_job,
        project=ascend,
        head_sha=npu_job.head_sha,
        test_id="test_ops.TestCommon.test_add_npu_float32",
    )
    return npu_job


def test_the_old_rule_left_every_privateuse1_name_but_openreg_in_the_id():
    assert old_test_id("test_add_npu_float32", GENERIC).key == "TestCommon.test_add_npu_float32"
    assert old_test_id("test_add_openreg_float32", GENERIC).key == "TestCommon.test_add_float32"


def test_it_counts_the_rows_the_new_rule_re_matches(stored):
    result = rematch(write=False)
    assert (result.rows, result.rematched) == (6, 4)
    assert ("test_ops.TestCommon.test_add_npu_float32", "test_ops.TestCommon.test_add_float32") in result.examples
    assert ("test_ops.TestCommonCPU.test_add_cpu_float32", "test_ops.TestCommon.test_add_float32") in result.examples
    assert IssueOccurrence.objects.get().test_id.endswith("test_add_npu_float32")  # a dry run writes nothing


def test_it_rewrites_occurrences_stored_under_the_old_identity(stored):
    assert rematch().occurrences == 1
    assert IssueOccurrence.objects.get().test_id == "test_ops.TestCommon.test_add_float32"
    assert rematch().occurrences == 0  # idempotent


def test_an_occurrence_already_stored_under_the_new_identity_is_not_doubled(stored):
    first = IssueOccurrence.objects.get()
    IssueOccurrence.objects.create(
        issue=first.issue,
        job_run=stored,
        project=first.project,
        head_sha=first.head_sha,
        test_id="test_ops.TestCommon.test_add_float32",
    )
    rematch()
    assert list(IssueOccurrence.objects.values_list("test_id", flat=True)) == ["test_ops.TestCommon.test_add_float32"]


def test_the_command_reports_how_many_rows_it_re_matched(stored, capsys):
    call_command("rematch_test_ids", "--dry-run")
    assert (
        "4 of 6 failed-test rows re-matched; 0 known-issue occurrences rewritten; test store: 0 attempts"
        in capsys.readouterr().out
    )
