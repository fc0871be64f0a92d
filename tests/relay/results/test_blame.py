"""Did this PR break a backend: already failing on trunk, new in this PR, or backend-only."""

import pytest

from hud.selectors_grid import pr_page
from relay.models import PullRequest
from relay.results.baseline import failures_load
from relay.results.blame import ALREADY, BACKEND_ONLY, FLAKY, NEW, pr_blame
from relay.results.cells import cells_for_commits, registered_backends
from tests.factories import DeliveryFactory, FailedTestFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db

HEAD, BASE = "a" * 40, "b" * 40
CONV = ("test.test_nn.TestNNDeviceTypeXPU", "test_conv2d_xpu_float32", "test/test_nn.py")
ADDMM = ("test_ops.TestCommonXPU", "test_addmm_xpu_float32", "test/test_ops.py")
REF_CONV = ("test_nn.TestNNDeviceTypePRIVATEUSE1", "test_conv2d_privateuse1_float32", "test_nn.py")


@pytest.fixture
def world():
    reference = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, level="L2", display_name="OpenReg")
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L3", device="xpu", display_name="Intel XPU")
    UpstreamCommitFactory(sha=BASE, is_trunk=True)
    UpstreamCommitFactory(sha=HEAD, is_trunk=False, pr_number=42)
    labels = ["ciflow/crcr/xpu", "module: nn"]
    pr = PullRequest.objects.create(number=42, author="alice", labels=labels, base_sha=BASE, head_sha=HEAD)
    # The webhook that told us: the check runs and the page read the PR's labels from it.
    payload = {"pull_request": {"number": 42, "labels": [{"name": name} for name in labels]}}
    DeliveryFactory(pr_number=42, head_sha=HEAD, action="labeled", payload=payload)
    return reference, xpu, pr


def result(project, sha, conclusion, tests=(), **fields):
    fields = {"tests_total": 100, "tests_failed": len(tests) or None, **fields}
    job = JobRunFactory(project=project, head_sha=sha, conclusion=conclusion, **fields)
    for classname, name, file in tests:
        FailedTestFactory(job_run=job, classname=classname, name=name, file=file)


def verdicts(blame):
    return {f.subject: f.verdict for b in blame for f in b.findings}


def test_a_failure_the_base_already_has_is_not_the_prs(world):
    reference, xpu, pr = world
    result(xpu, BASE, "failure", [CONV])
    result(xpu, HEAD, "failure", [CONV], pr_number=42)
    assert verdicts(pr_blame(HEAD, pr, registered_backends())) == {
        "test_nn.TestNNDeviceType.test_conv2d_float32": ALREADY
    }


def test_a_new_failure_the_reference_shares_is_new_in_this_pr(world):
    reference, xpu, pr = world
    result(xpu, BASE, "success")
    result(reference, HEAD, "failure", [REF_CONV], pr_number=42)
    result(xpu, HEAD, "failure", [CONV], pr_number=42)
    assert verdicts(pr_blame(HEAD, pr, registered_backends())) == {"test_nn.TestNNDeviceType.test_conv2d_float32": NEW}


def test_a_new_failure_the_reference_passes_is_backend_only(world):
    reference, xpu, pr = world
    result(reference, HEAD, "success", pr_number=42)
    result(xpu, HEAD, "failure", [ADDMM], pr_number=42)
    (blame,) = pr_blame(HEAD, pr, registered_backends())
    assert verdicts([blame]) == {"test_ops.TestCommon.test_addmm_float32": BACKEND_ONLY} and blame.blocks


def test_a_build_failure_compares_as_a_job(world):
    reference, xpu, pr = world
    result(xpu, BASE, "failure", tests_total=None, job_name="build")
    result(xpu, HEAD, "failure", tests_total=None, job_name="build", pr_number=42)
    assert verdicts(pr_blame(HEAD, pr, registered_backends())) == {"ci / build": ALREADY}


def test_blame_names_each_failing_test_as_the_one_loader_of_a_cells_failures_does(world):
    """The module of a test reported without one is filled in from the whole commit (the
    reference's reports too), never from the backend's head alone: where the commit holds two
    modules for it, the one the verdict table names is the one every other list names."""
    reference, xpu, pr = world
    no_module = ("TestNNDeviceTypeXPU", "test_conv2d_xpu_float32", "")
    other_module = ("TestNNDeviceTypePRIVATEUSE1", "test_conv2d_privateuse1_float32", "test/nn/test_convolution.py")
    result(reference, HEAD, "failure", [other_module], pr_number=42)
    result(xpu, HEAD, "failure", [CONV], pr_number=42, job_name="shard 1")
    result(xpu, HEAD, "failure", [no_module], pr_number=42, job_name="shard 2")
    loaded = failures_load(cells_for_commits([HEAD], [reference, xpu], detail=True))[(HEAD, xpu.id)]
    (blame,) = [b for b in pr_blame(HEAD, pr, registered_backends()) if b.project == xpu]
    assert {f.subject for f in blame.findings if f.kind == "test"} == {tid.full for tid in loaded.tests}
    assert {tid.full for tid in loaded.tests} == {
        "test_nn.TestNNDeviceType.test_conv2d_float32",
        "TestNNDeviceType.test_conv2d_float32",
    }


def flaky_on(project, test_id: str) -> None:
    from relay.models import TestHealth, TestIdentity
    from relay.policy.testids import test_id as parse

    classname, method = test_id.rsplit(".", 1)
    (pk,) = TestIdentity.objects.ids_for({parse(method, classname)}).values()
    TestHealth.objects.create(identity_id=pk, project=project, state="flaky")


def test_a_flaky_tests_failure_the_reference_shares_reads_shared_and_is_the_prs(world):
    """The flaky excuse is the backend's own (relay.results.tests.reads_flaky): a failure the
    reference fails too on the head, and not on trunk, is this PR's break for everyone."""
    reference, xpu, pr = world
    flaky_on(xpu, "test_nn.TestNNDeviceType.test_conv2d_float32")
    result(reference, BASE, "success")
    result(xpu, BASE, "success")
    result(reference, HEAD, "failure", [REF_CONV], pr_number=42)
    result(xpu, HEAD, "failure", [CONV], pr_number=42)
    (blame,) = [b for b in pr_blame(HEAD, pr, registered_backends()) if b.project == xpu]
    assert verdicts([blame]) == {"test_nn.TestNNDeviceType.test_conv2d_float32": NEW}


def test_a_flaky_tests_backend_only_failure_is_excused_as_flaky(world):
    reference, xpu, pr = world
    flaky_on(xpu, "test_ops.TestCommon.test_addmm_float32")
    result(reference, HEAD, "success", pr_number=42)
    result(xpu, HEAD, "failure", [ADDMM], pr_number=42)
    (blame,) = pr_blame(HEAD, pr, registered_backends())
    assert verdicts([blame]) == {"test_ops.TestCommon.test_addmm_float32": FLAKY} and not blame.blocks


def test_the_pr_page_shows_author_labels_base_and_the_l3_backends_the_labels_select(world):
    reference, xpu, pr = world
    result(xpu, HEAD, "failure", [ADDMM], pr_number=42)
    page = pr_page(42)
    assert page.info.author == "alice" and page.l3_labelled == [xpu] and page.blame[0].project == xpu


# --- a PR's own break of the reference (issue 50 item 2) -------------------------------------------


def test_a_failure_the_reference_shares_is_the_prs_own_break_of_it_when_the_base_passed(world, client):
    from relay.results.blame import reference_broken_by

    reference, xpu, pr = world
    result(reference, BASE, "success")
    result(xpu, BASE, "success")
    result(reference, HEAD, "failure", [REF_CONV], pr_number=42)
    result(xpu, HEAD, "failure", [CONV], pr_number=42)
    blame = pr_blame(HEAD, pr, registered_backends())
    assert [(b.project, b.headline) for b in blame] == [(reference, "1 new in this PR"), (xpu, "1 new in this PR")]
    assert reference_broken_by(blame)
    page = pr_page(42)
    assert "shared (upstream)" not in page.summary and not page.heads[0].row.upstream_broken
    summary = client.get("/pr/42").content.decode().split('id="pr-summary"')[1].split("</p>")[0]
    assert "upstream broken" not in summary and "which this PR broke" in summary
    verdict_table = client.get("/pr/42").content.decode().split('id="pr-blame"')[1]
    assert 'data-repo="pytorch/openreg-ci"' in verdict_table and "OpenReg" in verdict_table
    assert "likely upstream" not in client.get("/pr/42").content.decode(), "no mark on the page calls it upstream's"


def test_a_reference_failure_the_base_already_had_stays_upstreams(world):
    from relay.results.blame import reference_broken_by

    reference, xpu, pr = world
    result(reference, BASE, "failure", [REF_CONV])
    result(reference, HEAD, "failure", [REF_CONV], pr_number=42)
    result(xpu, HEAD, "failure", [CONV], pr_number=42)
    blame = pr_blame(HEAD, pr, registered_backends())
    assert [verdicts([b]) for b in blame] == [{"test_nn.TestNNDeviceType.test_conv2d_float32": ALREADY}] * 2
    assert not any(b.blocks for b in blame), "upstream broke it before this PR: on no backend is it the PR's"
    assert not reference_broken_by(blame) and pr_page(42).heads[0].row.upstream_broken
