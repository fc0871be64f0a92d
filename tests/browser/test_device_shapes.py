"""Is this failure upstream's or my backend's, asked in Chromium of backends of four device
shapes, named as PyTorch's instantiate_device_type_tests names them (the rows below are copied
from tests/fixtures/pytorch-reports, made by the real producer):

* the reference, OpenReg: class `…PRIVATEUSE1`, methods `_openreg_`;
* Intel XPU: pytest from the checkout's root, class `…XPU`, methods `_xpu_`;
* AMD ROCm: unittest-xml-reporting, class `…CUDA`, methods `_cuda_` (ROCm runs as cuda);
* Ascend: class `…PRIVATEUSE1`, methods `_npu_` (its registry device_type says npu);
* Spyre: class `…PRIVATEUSE1`, methods `_spyre_` (nothing told: the word is learned from its report).

Upstream breaks test_binary_op_sub on one commit: every backend's failure of it must read
*shared*; Spyre's own test_index_error must read *backend-only*."""

from datetime import UTC, datetime

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHA = "5ab0" + "c0ffee" * 6
CLASS = "test_device_generic.TestDeviceGeneric"
BACKENDS = {
    # full name: (display, level, device_type, classname, name template, file); an L3's `device` is its label's
    "pytorch/openreg-ci": ("OpenReg", "L2", "", f"{CLASS}PRIVATEUSE1", "{t}_openreg{dt}", "test_device_generic.py"),
    "intel/torch-xpu-ops": ("Intel XPU", "L4", "", f"test.{CLASS}XPU", "{t}_xpu{dt}", "test/test_device_generic.py"),
    "ROCm/pytorch": ("AMD ROCm", "L3", "", f"{CLASS}CUDA", "{t}_cuda{dt}", ""),
    "Ascend/pytorch": ("Ascend NPU", "L3", "npu", f"{CLASS}PRIVATEUSE1", "{t}_npu{dt}", "test_device_generic.py"),
    "torch-spyre/torch-spyre": ("Spyre", "L2", "", f"{CLASS}PRIVATEUSE1", "{t}_spyre{dt}", "test_device_generic.py"),
}
UPSTREAM = ("test_binary_op_sub", "_float32")
SPYRE_OWN = ("test_index_error", "")


@pytest.fixture
def shapes(transactional_db):
    from relay.models import FailedTest, JobRun, Project, UpstreamCommit

    UpstreamCommit.objects.create(
        sha=SHA, title="Change sub's type promotion (#170404)", is_trunk=True, branch="main",
        landed_at=datetime(2026, 12, 1, 8, tzinfo=UTC),
    )  # fmt: skip
    projects = {}
    for position, (full_name, (display, level, device_type, cls, name, file)) in enumerate(BACKENDS.items()):
        project = Project.objects.create(
            full_name=full_name, display_name=display, level=level, device_type=device_type,
            device={"AMD ROCm": "rocm", "Ascend NPU": "npu"}.get(display, ""),
            is_reference=full_name == "pytorch/openreg-ci", hardware_kind="gpu", position=position,
        )  # fmt: skip
        failing = [UPSTREAM, *([SPYRE_OWN] if display == "Spyre" else [])]
        job = JobRun.objects.create(
            project=project, delivery_key=f"{SHA[:8]}-{position}", event_type="push", run_id=f"9{position}",
            workflow_name="pull", job_name="test (default, 1, 1)", status="completed", conclusion="failure",
            head_sha=SHA, tests_total=40, tests_passed=40 - len(failing), tests_failed=len(failing),
        )  # fmt: skip
        FailedTest.objects.bulk_create(
            FailedTest(job_run=job, classname=cls, name=name.format(t=t, dt=dt), file=file, message="AssertionError")
            for t, dt in failing
        )
        projects[display] = project
    return projects


def _cell(page, project):
    return page.locator(f'#hud-grid tr[data-sha="{SHA}"] td.c[data-p="{project.pk}"]')


@pytest.mark.parametrize("width", [1600, 390])
def test_an_upstream_break_reads_shared_on_every_device_shape(browser, live_server, shapes, screenshots, width):
    context = browser.new_context(viewport={"width": width, "height": 1000})
    page = context.new_page()
    page.goto(live_server.url + f"/commit/{SHA}")
    for display in ("Intel XPU", "AMD ROCm", "Ascend NPU"):
        section = page.locator(f"details#compare-{shapes[display].pk}").text_content()
        assert "test_device_generic.TestDeviceGeneric.test_binary_op_sub_float32" in section, display
        assert "Shared with reference" in section and "Backend-specific" not in section, display
    spyre = page.locator(f"details#compare-{shapes['Spyre'].pk}").text_content()
    assert "Shared with reference" in spyre and "Backend-specific" in spyre
    assert "test_device_generic.TestDeviceGeneric.test_index_error" in spyre
    assert page.evaluate("document.documentElement.scrollWidth") <= width + 1, "no sideways scroll"
    page.screenshot(path=str(screenshots / f"device-shapes-commit-{width}.png"), full_page=True)
    context.close()


def test_the_grid_marks_each_device_shape_as_the_api_does(page, live_server, shapes):
    import json
    import urllib.request

    with urllib.request.urlopen(live_server.url + f"/api/v1/commits/{SHA}/baseline", timeout=30) as answer:
        baseline = json.load(answer)
    by_name = {b["full_name"]: b for b in baseline["backends"]}
    backends = {name: by_name[p.full_name] for name, p in shapes.items() if name != "OpenReg"}
    assert {name: b["mark"] for name, b in backends.items()} == {
        "Intel XPU": "shared",
        "AMD ROCm": "shared",
        "Ascend NPU": "shared",
        "Spyre": "mixed",
    }
    upstream = f"{CLASS}.test_binary_op_sub_float32"
    assert all([t["test_id"] for t in b["shared"]] == [upstream] for b in backends.values())
    assert [t["test_id"] for t in backends["Spyre"]["backend_only"]] == [f"{CLASS}.test_index_error"]
    page.goto(live_server.url + "/")
    page.wait_for_selector("#hud-grid td.c")
    for display in ("Intel XPU", "AMD ROCm", "Ascend NPU"):
        assert _cell(page, shapes[display]).locator("i.mk-shared").count() == 1, display
    assert _cell(page, shapes["Spyre"]).locator("i.mk-mixed").count() == 1
