"""Causes as the pages and the API read them: impact per cause, new first for a backend, shared
with the reference or not, and a backend's missing operators ranked with the reference beside."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.models import FailureCause
from relay.results.causes import CauseQuery, cause_found, causes_listed, missing_operators
from relay.teststore import tasks
from relay.teststore.causes import causes_sweep
from relay.teststore.store import store_sweep
from tests.factories import UpstreamCommitFactory

from .conftest import FFT, failing, ran

pytestmark = pytest.mark.django_db
FFT_OP = "aten::_fft_c2c"


def listed(**query):
    return {(r.cause.exception, r.cause.signature): r for r in causes_listed(CauseQuery(**query))}


def test_a_backends_failures_read_as_their_causes_with_their_impact(world):
    rows = listed(project_ids=(world["xpu"].pk,))
    assert {key: (r.tests, r.commits, r.runs, r.shared) for key, r in rows.items()} == {
        ("NotImplementedError", FFT_OP): (3, 3, 3, False),
        ("AssertionError", "Tensor-likes are not close!"): (2, 3, 3, False),
        ("IndexError", "index <n> is out of bounds for dimension <n> with size <n>"): (1, 3, 3, True),
    }
    assert [p.full_name for p in rows[("NotImplementedError", FFT_OP)].backends] == [
        "Ascend/pytorch",
        "intel/torch-xpu-ops",
    ]


def test_a_cause_new_to_the_backend_comes_first(world):
    later = timezone.now() + timedelta(days=3)
    commit = UpstreamCommitFactory(landed_at=later - timedelta(hours=1), is_trunk=True)
    ran(world["xpu"], commit, [failing("XPU", "xpu", "test_new", "KeyError: 'xpu_only'")])
    store_sweep(now=later)
    causes_sweep()
    rows = causes_listed(CauseQuery(project_ids=(world["xpu"].pk,), days=7), now=later)
    assert [(r.cause.exception, r.new) for r in rows] == [
        ("KeyError", True),
        ("NotImplementedError", False),
        ("AssertionError", False),
        ("IndexError", False),
    ]


def test_filters_narrow_the_list(world):
    assert set(listed(shared=True)) == {("IndexError", "index <n> is out of bounds for dimension <n> with size <n>")}
    assert set(listed(kind="missing_operator")) == {("NotImplementedError", FFT_OP)}
    assert set(listed(sha=world["commits"][0].sha, project_ids=(world["npu"].pk,))) == {("NotImplementedError", FFT_OP)}
    assert listed(operator="aten::nope") == {}


def test_missing_operators_are_ranked_by_tests_with_the_reference_beside(world):
    two = FFT.replace("_fft_c2c", "_linalg_eigvals")
    failed = [failing("XPU", "xpu", f"test_eig_{i}", two.format(key="XPU")) for i in range(5)]
    ran(world["xpu"], world["commits"][0], failed, attempt=2)
    tasks.test_store_sweep.apply()
    ranked = missing_operators(world["xpu"])
    assert [(m.rank, m.operator, m.tests, m.reference_state) for m in ranked] == [
        (1, "aten::_linalg_eigvals", 5, "not failing"),
        (2, FFT_OP, 3, "not failing"),
    ]


def test_a_missing_operator_the_reference_lacks_too_says_so(world):
    ran(
        world["reference"],
        world["commits"][0],
        [failing("PrivateUse1", "openreg", "test_fft_0", FFT.format(key="PrivateUse1"))],
        2,
    )
    tasks.test_store_sweep.apply()
    assert missing_operators(world["npu"])[0].reference_state == "missing on the reference too (1 tests)"


def test_one_cause_in_full(world):
    cause = FailureCause.objects.get(kind="missing_operator")
    detail = cause_found(cause.pk)
    assert detail.current and not detail.shared and detail.runs == 6
    assert [(b["project__full_name"], b["tests"]) for b in detail.backends] == [
        ("intel/torch-xpu-ops", 3),
        ("Ascend/pytorch", 2),
    ]
    assert len(detail.commits) == 3 and detail.tests[0]["failures"] == 3
    assert sum(sum(v) for v in detail.trend["series"].values()) > 0
    assert cause_found(cause.pk + 999) is None
