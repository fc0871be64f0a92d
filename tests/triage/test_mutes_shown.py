"""Mutes as the pages show them: a muted failure marks no cell "± mixed" (the cell's mark is that
of the failures the mute does not cover), and the backend page lists the backend's mutes in force
— what each covers, who, until when."""

import pytest

from relay.results.baseline import MIXED, SHARED, baseline_marks
from relay.triage import mutes

from .conftest import XPU_ADDMM, XPU_SUM, result

pytestmark = pytest.mark.django_db
ADDMM = "test_ops.TestCommon.test_addmm_float32"
REF_SUM = {
    "classname": "test_reductions.TestReductionsPRIVATEUSE1",
    "name": "test_sum_privateuse1_float16",
    "file": "test/test_reductions.py",
    "message": "AssertionError: Scalars are not close!",
}


def test_a_muted_failure_does_not_make_a_shared_cell_mixed(backends, trunk):
    """XPU fails test_sum (the reference fails it too: shared) and test_addmm (backend-only); once
    test_addmm is muted, the cell reads shared, not mixed."""
    sha = trunk[0].sha
    result(backends["ref"], sha, [REF_SUM])
    result(backends["xpu"], sha, [XPU_ADDMM, XPU_SUM])
    key = (sha, backends["xpu"].id)
    assert baseline_marks([sha])[key] == MIXED
    mutes.mute_create(backends["xpu"], ADDMM, "upstream fix in #150001", "xpu-oncall", "alice")
    assert baseline_marks([sha])[key] == SHARED


def test_a_cell_failing_only_muted_tests_keeps_the_mark_of_its_failures(backends, trunk):
    """Every failure muted: nothing is left to mark by, so the mark is still that of its failures."""
    sha = trunk[0].sha
    result(backends["ref"], sha)
    result(backends["xpu"], sha, [XPU_ADDMM])
    mutes.mute_create(backends["xpu"], ADDMM, "upstream fix in #150001", "xpu-oncall", "alice")
    assert baseline_marks([sha])[(sha, backends["xpu"].id)] == "backend"


def test_the_backend_page_lists_the_mutes_in_force_with_who_and_until_when(client, backends, trunk):
    page = client.get("/crcr/intel/torch-xpu-ops").content.decode()
    assert 'id="mutes"' in page and "No test is muted on this backend" in page
    made = mutes.mute_create(backends["xpu"], ADDMM, "upstream fix in #150001", "xpu-oncall", "alice")
    other = mutes.mute_create(backends["rocm"], "test_ops.TestCommon.test_mm_float32", "r", "rocm-oncall", "bob")
    page = client.get("/crcr/intel/torch-xpu-ops").content.decode()
    section = page[page.index('id="mutes"') :].split("</section>")[0]
    assert "(1 in force)" in section and ADDMM in section and "xpu-oncall · alice" in section
    assert made.expires_at.strftime("%Y-%m-%d") in section and "upstream fix in #150001" in section
    assert "left out of the upstream-adjusted pass rate, the merge gate" in section
    assert "rocm-oncall" not in section and other.identity.identity not in section
    mutes.mute_lift(made, "alice")
    assert "No test is muted on this backend" in client.get("/crcr/intel/torch-xpu-ops").content.decode()
