"""The two questions the HUD exists for, asked in Chromium on a store built from the shapes real
producers send: "is my backend broken by upstream or by itself, and since which commit?" and
"did my PR break any backend?".

The story, on six trunk commits c0 … c5 (each the first parent of the next):
* the reference (imported from PyTorch's CI: `classname="test_nn.TestNNDeviceTypePRIVATEUSE1"`,
  `file="test_nn.py"`) never ran on c1 (a never-started row) and timed out on c2;
* c3 breaks `test_conv2d` upstream: the reference fails it, and so do Intel XPU (pytest from the
  checkout's root: `test.test_nn.TestNNDeviceTypeXPU`) and AMD ROCm (bare class, file beside);
* c4 fixes it, but Intel XPU starts failing `test_addmm` on its own, on c4 and c5;
* PR #4242 (base c5) fails `test_addmm` (already failing on trunk) and a new `test_sum` that
  the reference passes on the PR head (backend-only)."""

from datetime import UTC, datetime, timedelta

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

T0 = datetime(2026, 11, 30, 8, tzinfo=UTC)
REF_CONV = {
    "classname": "test_nn.TestNNDeviceTypePRIVATEUSE1",
    "name": "test_conv2d_privateuse1_float32",
    "file": "test_nn.py",
}
XPU_CONV = {
    "classname": "test.test_nn.TestNNDeviceTypeXPU",
    "name": "test_conv2d_xpu_float32",
    "file": "test/test_nn.py",
}
ROCM_CONV = {"classname": "TestNNDeviceTypeCUDA", "name": "test_conv2d_cuda_float32", "file": "test/test_nn.py"}
XPU_ADDMM = {"classname": "test.test_ops.TestCommonXPU", "name": "test_addmm_xpu_float32", "file": "test/test_ops.py"}
XPU_SUM = {
    "classname": "test.test_reductions.TestReductionsXPU",
    "name": "test_sum_xpu_float16",
    "file": "test/test_reductions.py",
}
PR, PR_HEAD = 4242, "e" * 40


@pytest.fixture
def story(transactional_db):
    from relay.models import Delivery, Project, PullRequest, UpstreamCommit

    reference = Project.objects.create(
        full_name="pytorch/openreg-ci", level="L2", is_reference=True, display_name="OpenReg", hardware_kind="reference"
    )
    xpu = Project.objects.create(
        full_name="intel/torch-xpu-ops", level="L4", display_name="Intel XPU", hardware_kind="gpu"
    )
    rocm = Project.objects.create(
        full_name="ROCm/pytorch", level="L3", device="rocm", display_name="AMD ROCm", hardware_kind="gpu"
    )
    trunk, parent = [], ""
    for i in range(6):
        trunk.append(
            UpstreamCommit.objects.create(
                sha=f"{i + 1:x}" * 40,
                title=f"Upstream change {i}",
                author="dev",
                is_trunk=True,
                branch="main",
                parent_sha=parent,
                landed_at=T0 + timedelta(hours=i),
            )
        )
        parent = trunk[-1].sha
    for i, commit in enumerate(trunk):
        _reference_result(reference, commit.sha, i)
        _result(xpu, commit.sha, [XPU_CONV] if i == 3 else [XPU_ADDMM] if i >= 4 else [])
        _result(rocm, commit.sha, [ROCM_CONV] if i == 3 else [])
    UpstreamCommit.objects.create(
        sha=PR_HEAD, title="Speed up reductions", author="alice", pr_number=PR, landed_at=T0 + timedelta(hours=7)
    )
    PullRequest.objects.create(
        number=PR, author="alice", labels=["ciflow/crcr/rocm"], base_sha=trunk[5].sha, head_sha=PR_HEAD
    )
    # The labelled webhook that told us so: the check runs and the PR page read labels from it.
    Delivery.objects.create(
        guid="two-questions-labeled",
        event="pull_request",
        action="labeled",
        outcome="relayed",
        pr_number=PR,
        head_sha=PR_HEAD,
        received_at=T0 + timedelta(hours=7),
        payload={"pull_request": {"number": PR, "labels": [{"name": "ciflow/crcr/rocm"}]}},
    )
    _result(xpu, PR_HEAD, [XPU_ADDMM, XPU_SUM], pr_number=PR)
    _reference_result(reference, PR_HEAD, 0, pr_number=PR)
    return {"trunk": trunk, "xpu": xpu, "rocm": rocm}


def _reference_result(reference, sha, index, pr_number=None):
    if index == 1:
        return _job(reference, sha, "", ended_by="never_started", run_id="-", workflow="", job="")
    if index == 2:
        return _job(reference, sha, "timed_out", ended_by="timed_out")
    _job(reference, sha, "failure" if index == 3 else "success", [REF_CONV] if index == 3 else [], pr_number=pr_number)


def _result(project, sha, failed, pr_number=None):
    _job(
        project,
        sha,
        "failure" if failed else "success",
        failed,
        workflow="ci",
        job="test (default, 1, 1)",
        pr_number=pr_number,
    )


def _job(project, sha, conclusion, failed=(), workflow="pull", job="test (openreg, 1, 1, linux.2xlarge)", **fields):
    from relay.models import FailedTest, JobRun

    run = JobRun.objects.create(
        project=project,
        delivery_key=f"{sha[:8]}-{project.pk}",
        event_type="pull_request" if fields.get("pr_number") else "push",
        run_id=fields.pop("run_id", f"{project.pk}{sha[:6]}"),
        workflow_name=workflow,
        job_name=job,
        status="completed",
        conclusion=conclusion,
        head_sha=sha,
        tests_total=None if fields.get("ended_by") else 500,
        tests_failed=len(failed) or None,
        **fields,
    )
    FailedTest.objects.bulk_create(
        FailedTest(job_run=run, message="AssertionError: Tensor-likes are not close!", **t) for t in failed
    )


def _cell(page, sha, project):
    return page.locator(f'#hud-grid tr[data-sha="{sha}"] td.c[data-p="{project.pk}"]')


def test_an_upstream_break_reads_likely_upstream_on_every_backend_sharing_it(page, live_server, story, screenshots):
    c3 = story["trunk"][3].sha
    page.goto(live_server.url + "/")
    page.wait_for_selector("#hud-grid td.c")
    for backend in (story["xpu"], story["rocm"]):
        assert _cell(page, c3, backend).locator("i.mk-shared").count() == 1
    assert page.locator("#hud-grid tr.broken").count() == 1, "only c3, where the reference really failed"
    assert page.locator(f'#hud-grid tr.broken[data-sha="{c3}"]').count() == 1
    page.screenshot(path=str(screenshots / "two-questions-grid.png"), full_page=True)

    page.goto(live_server.url + f"/commit/{c3}")
    shared = page.locator(f"details#compare-{story['xpu'].pk}")
    assert "test_nn.TestNNDeviceType.test_conv2d_float32" in shared.text_content()
    assert "Shared with reference" in shared.text_content() and "Reference only" not in shared.text_content()
    assert "fails too (likely upstream)" in page.inner_text("#multi")
    assert "Upstream broken" in page.inner_text(".broken-banner")
    page.screenshot(path=str(screenshots / "two-questions-commit.png"), full_page=True)


def test_a_backend_only_break_reads_backend_specific_and_names_its_first_failing_commit(
    page, live_server, story, screenshots
):
    trunk, xpu = story["trunk"], story["xpu"]
    page.goto(live_server.url + "/")
    page.wait_for_selector("#hud-grid td.c")
    assert _cell(page, trunk[5].sha, xpu).locator("i.mk-backend").count() == 1
    _cell(page, trunk[5].sha, xpu).click()
    streaks = page.locator("#hud-tip .streaks")
    streaks.wait_for()
    text = streaks.inner_text()
    assert (
        f"failing since {trunk[4].sha[:7]}" in text
        and f"last passed at {trunk[3].sha[:7]}" in text
        and "culprit" in text
    )

    page.goto(live_server.url + "/crcr/intel/torch-xpu-ops")
    failing_now = page.locator(".failing-now")
    assert "test_ops.TestCommon.test_addmm_float32" in failing_now.inner_text()
    assert f"failing since {trunk[4].sha[:7]}" in failing_now.inner_text()
    assert page.locator("table.matrix th.ref-col").count() == 1
    page.screenshot(path=str(screenshots / "two-questions-backend.png"), full_page=True)


def test_no_upstream_broken_badge_where_the_reference_passed_or_did_not_run(page, live_server, story):
    page.goto(live_server.url + "/")
    page.wait_for_selector("#hud-grid td.c")
    for index in (0, 1, 2, 4, 5):
        row = page.locator(f'#hud-grid tr[data-sha="{story["trunk"][index].sha}"]')
        assert row.locator(".broken-badge").count() == 0 and "broken" not in (row.get_attribute("class") or "")
    page.goto(live_server.url + "/crcr")
    assert page.locator("text=pytorch/openreg-ci").count() == 0, "the reference is not ranked among backends"


def test_the_pr_page_says_which_failures_are_the_prs(page, live_server, story, screenshots):
    page.goto(live_server.url + f"/pr/{PR}")
    blame = page.locator("#pr-blame")
    text = blame.inner_text()
    assert "Intel XPU" in text and "1 backend-only" in text and "1 already failing on trunk" in text
    meta = page.inner_text("#pr-meta")
    assert "alice" in meta and "ciflow/crcr/rocm" in meta and story["trunk"][5].sha[:7] in meta and "AMD ROCm" in meta
    page.screenshot(path=str(screenshots / "two-questions-pr.png"), full_page=True)
