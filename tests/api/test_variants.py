# ruff: noqa: F811 - the fixtures imported below are the tests' arguments
"""/api/v1/commits/<sha>/baseline says which hardware variant fails alone, as the commit page
does (relay.results.variants): per test, and per backend when every failing job is one variant's."""

import pytest

from tests.relay.results.test_variants import mi300_alone, rocm_commit  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


def _rocm(api, sha: str) -> dict:
    body = api.get(f"/api/v1/commits/{sha}/baseline").json()
    return next(b for b in body["backends"] if b["full_name"] == "ROCm/pytorch")


def _tests(backend: dict) -> dict[str, str]:
    return {
        t["name"]: t["variant_only"] for kind in ("backend_only", "not_comparable", "shared") for t in backend[kind]
    }


def test_a_test_one_variant_fails_alone_says_so_and_one_both_fail_does_not(api, rocm_commit):
    _, commit, _ = rocm_commit
    rocm = _rocm(api, commit.sha)
    tests = _tests(rocm)
    assert tests["test_ops.TestCommonCUDA.test_add_cuda_float32"] == "MI300"
    assert tests["test_ops.TestCommonCUDA.test_mul_cuda_float32"] == ""
    assert rocm["variant_only"] == "", "both variants fail something here"


def test_a_backend_failing_on_one_variant_alone_says_which(api, mi300_alone):
    _, commit, _ = mi300_alone
    rocm = _rocm(api, commit.sha)
    assert rocm["variant_only"] == "MI300" and set(_tests(rocm).values()) == {"MI300"}
