"""The baseline comparison: each backend's failures against the OpenReg reference's."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from relay.results.baseline import baseline_marks, commit_baseline
from tests.factories import (
    DeliveryFactory,
    DispatchFactory,
    FailedTestFactory,
    JobRunFactory,
    ProjectFactory,
    UpstreamCommitFactory,
)

pytestmark = pytest.mark.django_db

SHA = "a" * 40
PARENT = "b" * 40


@pytest.fixture
def reference():
    return ProjectFactory(
        full_name="pytorch/openreg-ci", is_reference=True, hardware_kind="reference", display_name="OpenReg"
    )


@pytest.fixture
def xpu():
    return ProjectFactory(full_name="intel/torch-xpu-ops", level="L4", display_name="Intel XPU")


@pytest.fixture
def rocm():
    return ProjectFactory(full_name="ROCm/pytorch", level="L3", device="rocm", display_name="AMD ROCm")


@pytest.fixture
def commit():
    UpstreamCommitFactory(sha=PARENT)
    return UpstreamCommitFactory(sha=SHA, parent_sha=PARENT)


def run(project, conclusion="success", sha=SHA, tests_total=100, failed=(), **fields):
    """One job attempt; `failed` are (classname, name), (classname, name, hw_classification) or
    dicts of FailedTest fields (name, classname, file, …) as a producer sent them."""
    job = JobRunFactory(
        project=project,
        head_sha=sha,
        conclusion=conclusion,
        tests_total=tests_total,
        tests_failed=len(failed) or None,
        **fields,
    )
    for test in failed:
        if isinstance(test, dict):
            FailedTestFactory(job_run=job, **{"file": "", "hw_classification": "", **test})
        else:
            FailedTestFactory(
                job_run=job, classname=test[0], name=test[1], hw_classification=test[2] if len(test) > 2 else ""
            )
    return job


REF_ADD = ("TestFooPRIVATEUSE1", "test_add_privateuse1_float32")
XPU_ADD = ("TestFooXPU", "test_add_xpu_float32")
XPU_MUL = ("TestFooXPU", "test_mul_xpu_float32")
ROCM_MUL = ("TestFooCUDA", "test_mul_cuda_float32")


def test_it_marks_a_failure_the_reference_shares(reference, xpu, commit):
    run(reference, "failure", failed=[REF_ADD])
    run(xpu, "failure", failed=[XPU_ADD])
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "shared"}
    comparison = commit_baseline(SHA).for_backend(xpu.id)
    assert [t.test_id for t in comparison.shared] == ["TestFoo.test_add_float32"] and comparison.mark == "shared"


def test_it_marks_a_failure_the_reference_passed_as_backend_specific(reference, xpu, commit):
    run(reference, "success")
    run(xpu, "failure", failed=[XPU_ADD])
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "backend"}
    assert [t.test_id for t in commit_baseline(SHA).for_backend(xpu.id).backend_only] == ["TestFoo.test_add_float32"]


def test_it_marks_a_backend_with_shared_and_own_failures_as_mixed(reference, xpu, commit):
    run(reference, "failure", failed=[REF_ADD])
    run(xpu, "failure", failed=[XPU_ADD, XPU_MUL])
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "mixed"}


def test_without_per_test_data_on_the_reference_failures_are_not_comparable(reference, xpu, commit):
    run(reference, "success", tests_total=None)
    run(xpu, "failure", failed=[XPU_ADD])
    baseline = commit_baseline(SHA)
    assert baseline.status == "job_level_only"
    assert [t.test_id for t in baseline.for_backend(xpu.id).not_comparable] == ["TestFoo.test_add_float32"]
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "backend"}, "job level: the reference passed as a job"


def test_a_commit_without_a_reference_result_says_no_baseline(reference, xpu, commit):
    run(xpu, "failure", failed=[XPU_ADD])
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "no_baseline"}
    baseline = commit_baseline(SHA)
    assert baseline.status == "no_baseline" and baseline.for_backend(xpu.id).not_comparable


def test_a_reference_still_running_is_no_baseline_yet(reference, xpu, commit):
    run(reference, status="in_progress", conclusion="", tests_total=None)
    run(xpu, "failure", failed=[XPU_ADD])
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "no_baseline"}


def test_no_registered_reference_means_no_baseline(xpu, commit):
    run(xpu, "failure", failed=[XPU_ADD])
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "no_baseline"}
    assert commit_baseline(SHA).status == "no_reference"


def test_a_reference_whose_build_failed_flags_the_commit_upstream_broken(reference, xpu, commit):
    run(reference, "failure", tests_total=None)
    run(xpu, "failure", tests_total=None)
    baseline = commit_baseline(SHA)
    assert baseline.upstream_broken and baseline.reference_job_level_failures == ["ci / test"]
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "shared"}


def test_a_reference_failing_tests_is_upstream_broken_too(reference, xpu, commit):
    run(reference, "failure", failed=[REF_ADD])
    baseline = commit_baseline(SHA)
    assert baseline.upstream_broken and baseline.upstream_broken_tests == 1


def test_a_reference_failure_an_open_known_issue_accounts_for_is_not_upstream_broken(reference, xpu, commit):
    from relay.models import KnownIssue
    from relay.results.baseline import grid_baseline
    from relay.results.cells import cells_for_commits

    issue = KnownIssue.objects.create(title="add broken upstream", kind="upstream", test_patterns=["TestFoo.test_add*"])
    run(reference, "failure", failed=[REF_ADD])
    run(xpu, "failure", failed=[XPU_ADD])
    baseline = commit_baseline(SHA)
    assert not baseline.upstream_broken
    assert [(k["id"], k["all"]) for k in baseline.reference_known_issues] == [(issue.pk, True)]
    _, broken = grid_baseline(cells_for_commits([SHA], [reference, xpu]), reference.id)
    assert broken == set()


def test_a_reference_with_one_known_and_one_new_failure_is_still_upstream_broken(reference, xpu, commit):
    from relay.models import KnownIssue

    KnownIssue.objects.create(title="add broken upstream", kind="upstream", test_patterns=["TestFoo.test_add*"])
    run(reference, "failure", failed=[REF_ADD, ("TestFooPRIVATEUSE1", "test_mul_privateuse1_float32")])
    baseline = commit_baseline(SHA)
    assert baseline.upstream_broken and [k["all"] for k in baseline.reference_known_issues] == [False]


@pytest.mark.parametrize(
    "fields",
    [
        {"conclusion": "timed_out", "ended_by": "timed_out"},
        {"conclusion": "cancelled"},
        {"conclusion": "", "ended_by": "never_started", "run_id": "-"},
    ],
)
def test_a_reference_that_did_not_run_means_no_baseline_never_upstream_broken(reference, xpu, commit, fields):
    run(reference, **fields)
    run(xpu, "failure", failed=[XPU_ADD])
    baseline = commit_baseline(SHA)
    assert not baseline.upstream_broken and baseline.status == "no_baseline"
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "no_baseline"}


def test_a_never_started_dispatch_row_does_not_hide_the_imported_reference_result(reference, xpu, commit):
    run(reference, "success", workflow_name="pull", job_name="test (openreg, 1, 1, linux.2xlarge)")
    run(reference, "", status="completed", ended_by="never_started", run_id="-", workflow_name="", job_name="")
    run(xpu, "failure", failed=[XPU_ADD])
    baseline = commit_baseline(SHA)
    assert baseline.reference_state == "success" and not baseline.upstream_broken
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "backend"}


def test_a_flaky_backend_job_is_not_a_failure(reference, xpu, commit):
    run(reference, "success")
    run(xpu, "failure", failed=[XPU_ADD], run_id="9", run_attempt=1)
    run(xpu, "success", run_id="9", run_attempt=2, created_at=timezone.now() + timedelta(minutes=5))
    assert baseline_marks([SHA]) == {}
    comparison = commit_baseline(SHA).for_backend(xpu.id)
    assert comparison.mark is None and comparison.state == "flaky" and not comparison.backend_only


def test_a_flaky_reference_job_counts_as_passing_its_earlier_failures(reference, xpu, commit):
    run(reference, "failure", failed=[REF_ADD], run_id="5", run_attempt=1)
    run(reference, "success", run_id="5", run_attempt=2, created_at=timezone.now() + timedelta(minutes=5))
    run(xpu, "failure", failed=[XPU_ADD])
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "backend"}


def test_superseded_work_is_never_compared(reference, xpu, commit):
    run(reference, "success")
    run(xpu, "cancelled", ended_by="superseded")
    assert baseline_marks([SHA]) == {}
    assert commit_baseline(SHA).for_backend(xpu.id).state == "superseded"


def test_a_timed_out_backend_job_without_a_report_is_infrastructure(reference, xpu, commit):
    run(reference, "success")
    run(xpu, "timed_out", ended_by="timed_out", tests_total=None)
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "infra"}
    assert commit_baseline(SHA).for_backend(xpu.id).infrastructure_failures == ["ci / test"]


def test_l1_backends_are_never_marked(reference, commit):
    l1 = ProjectFactory(level="L1")
    DispatchFactory(project=l1, delivery=DeliveryFactory(head_sha=SHA), head_sha=SHA, state="failed")
    run(reference, "failure", failed=[REF_ADD])
    assert baseline_marks([SHA]) == {}
    assert l1.id not in {b.project_id for b in commit_baseline(SHA).backends}


def test_it_lists_tests_the_reference_fails_but_the_backend_passed(reference, xpu, rocm, commit):
    run(reference, "failure", failed=[REF_ADD])
    run(xpu, "success")
    run(rocm, "success", tests_total=None)
    baseline = commit_baseline(SHA)
    assert [t.test_id for t in baseline.for_backend(xpu.id).reference_only] == ["TestFoo.test_add_float32"]
    assert baseline.for_backend(rocm.id).reference_only == [], "without per-test data rocm cannot be said to pass it"


def test_it_says_which_failures_are_new_against_the_first_parent(reference, xpu, commit):
    run(reference, "failure", failed=[REF_ADD], sha=PARENT)
    run(xpu, "failure", failed=[XPU_ADD], sha=PARENT)
    run(reference, "failure", failed=[REF_ADD])
    run(xpu, "failure", failed=[XPU_ADD, XPU_MUL])
    comparison = commit_baseline(SHA).for_backend(xpu.id)
    (shared,), (own,) = comparison.shared, comparison.backend_only
    assert (shared.new_vs_parent, shared.reference_new_vs_parent) == (False, False)
    assert own.test_id == "TestFoo.test_mul_float32" and own.new_vs_parent is True


def test_new_vs_parent_is_unknown_when_the_parent_has_no_result(reference, xpu, commit):
    run(xpu, "failure", failed=[XPU_ADD])
    run(reference, "success")
    assert commit_baseline(SHA).for_backend(xpu.id).backend_only[0].new_vs_parent is None


def test_hardware_classified_backend_only_failures_rank_first(reference, xpu, commit):
    run(reference, "success")
    run(
        xpu,
        "failure",
        failed=[
            ("TestAXPU", "test_a_xpu"),
            ("TestZXPU", "test_z_xpu", "ACCELERATOR"),
            ("TestYXPU", "test_y_xpu", "generic"),
        ],
    )
    ranked = commit_baseline(SHA).for_backend(xpu.id).backend_only
    assert [t.test_id for t in ranked] == ["TestY.test_y", "TestZ.test_z", "TestA.test_a"]
    assert [t.ranked_first for t in ranked] == [True, True, False]


def test_it_lists_tests_failing_on_several_backends(reference, xpu, rocm, commit):
    run(reference, "success")
    run(xpu, "failure", failed=[XPU_MUL, XPU_ADD])
    run(rocm, "failure", failed=[ROCM_MUL])
    (multi,) = commit_baseline(SHA).multi_backend
    assert (
        multi.test_id == "TestFoo.test_mul_float32"
        and sorted(multi.backends) == ["AMD ROCm", "Intel XPU"]
        and not multi.reference_fails
    )
    assert commit_baseline(SHA).for_backend(xpu.id).backend_only[1].also_failing_on == ["AMD ROCm"]


def test_the_comparison_serialises_to_json(reference, xpu, commit):
    run(reference, "failure", failed=[REF_ADD])
    run(xpu, "failure", failed=[XPU_ADD, XPU_MUL])
    data = json.loads(json.dumps(commit_baseline(SHA).to_dict()))
    assert data["status"] == "compared" and data["backends"][0]["mark"] == "mixed"


def test_grid_marks_cost_a_constant_number_of_queries(reference, xpu, rocm, django_assert_max_num_queries):
    shas = [f"{i:040x}" for i in range(30)]
    for sha in shas:
        run(reference, "failure", sha=sha, failed=[REF_ADD])
        run(xpu, "failure", sha=sha, failed=[XPU_ADD])
        run(rocm, "failure", sha=sha, failed=[ROCM_MUL])
    # one query of them the failing backends' mutes: a muted failure marks nothing (relay.triage.mutes)
    with django_assert_max_num_queries(7):
        marks = baseline_marks(shas)
    assert set(marks.values()) == {"shared", "backend"} and len(marks) == 60


# --- test identity across producers -------------------------------------------------------------

# The reference as PyTorch's CI reports it (JUnit written from inside test/).
PYTORCH_JUNIT = {
    "classname": "test_nn.TestNNDeviceTypePRIVATEUSE1",
    "name": "test_conv2d_backward_privateuse1_bfloat16",
    "file": "test_nn.py",
}
# A backend running pytest from its checkout's root, reported by our client.
PYTEST_ROOT = {
    "classname": "test.test_nn.TestNNDeviceTypeXPU",
    "name": "test_conv2d_backward_xpu_bfloat16",
    "file": "test/test_nn.py",
}
# The sandbox's and many reporters' shape: the bare class, the file beside it.
BARE_CLASS = {
    "classname": "TestNNDeviceTypeCUDA",
    "name": "test_conv2d_backward_cuda_bfloat16",
    "file": "test/test_nn.py",
}
# A reporter that sends only the class and method.
NO_MODULE = {"classname": "TestNNDeviceTypeXPU", "name": "test_conv2d_backward_xpu_bfloat16"}


@pytest.mark.parametrize(
    "backend_test", [PYTEST_ROOT, BARE_CLASS, NO_MODULE], ids=["pytest-root", "bare-class", "no-module"]
)
def test_an_upstream_break_is_shared_whatever_shape_each_producer_reports(reference, xpu, commit, backend_test):
    run(reference, "failure", failed=[PYTORCH_JUNIT])
    run(xpu, "failure", failed=[backend_test])
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "shared"}
    baseline = commit_baseline(SHA)
    comparison = baseline.for_backend(xpu.id)
    assert [t.test_id for t in comparison.shared] == ["test_nn.TestNNDeviceType.test_conv2d_backward_bfloat16"]
    assert comparison.reference_only == [] and baseline.upstream_broken


@pytest.mark.parametrize("device_type", ["cpu", "hpu", "xla", "lazy", "meta"])
def test_an_upstream_break_is_shared_on_a_backend_of_any_torch_device_type(reference, commit, device_type):
    """The inverted answer issue 44 found: a RISC-V CPU CI (or any device type PyTorch knows)
    failing the very test the reference fails must read shared, never backend-only."""
    backend = ProjectFactory(full_name=f"example/{device_type}-ci", level="L2")
    run(reference, "failure", failed=[PYTORCH_JUNIT])
    run(
        backend,
        "failure",
        failed=[
            {
                "classname": f"test_nn.TestNNDeviceType{device_type.upper()}",
                "name": f"test_conv2d_backward_{device_type}_bfloat16",
                "file": "test_nn.py",
            }
        ],
    )
    assert baseline_marks([SHA]) == {(SHA, backend.id): "shared"}


def test_failing_on_several_backends_says_the_reference_fails_it_too(reference, xpu, rocm, commit):
    run(reference, "failure", failed=[PYTORCH_JUNIT])
    run(xpu, "failure", failed=[PYTEST_ROOT])
    run(rocm, "failure", failed=[BARE_CLASS])
    (multi,) = commit_baseline(SHA).multi_backend
    assert multi.reference_fails and sorted(multi.backends) == ["AMD ROCm", "Intel XPU"]


def test_a_module_less_test_is_not_matched_when_two_modules_have_that_class_and_method(reference, xpu, commit):
    other_module = {
        **PYTORCH_JUNIT,
        "classname": "test_nn_extra.TestNNDeviceTypePRIVATEUSE1",
        "file": "test_nn_extra.py",
    }
    run(reference, "failure", failed=[PYTORCH_JUNIT, other_module])
    run(xpu, "failure", failed=[NO_MODULE])
    comparison = commit_baseline(SHA).for_backend(xpu.id)
    assert (
        comparison.shared == []
        and comparison.not_comparable[0].test_id == "TestNNDeviceType.test_conv2d_backward_bfloat16"
    )


def test_a_test_in_another_module_is_a_different_test(reference, xpu, commit):
    run(reference, "failure", failed=[PYTORCH_JUNIT])
    run(
        xpu,
        "failure",
        failed=[{**PYTEST_ROOT, "classname": "test.test_ops.TestNNDeviceTypeXPU", "file": "test/test_ops.py"}],
    )
    assert baseline_marks([SHA]) == {(SHA, xpu.id): "backend"}
