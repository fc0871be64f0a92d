"""Every outcome as the real producers write it (tests/fixtures/pytorch-reports): pytest's and
unittest-xml-reporting's JUnit read into passed / failed / error / skipped / xfailed / xpassed."""

from pathlib import Path

import pytest

from relay.reference.junit import TestReport, junit_parse

REPORTS = Path(__file__).parents[1] / "fixtures" / "pytorch-reports"
COUNTS = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def read(path: Path) -> TestReport:
    report = TestReport()
    for file in sorted(path.glob("*.xml")) if path.is_dir() else [path]:
        report.merge(junit_parse(file.read_bytes(), file.name))
    return report


def counts(report: TestReport) -> dict:
    return {outcome: getattr(report, outcome) for outcome in COUNTS}


@pytest.mark.parametrize("device", ["openreg", "npu", "xpu", "cuda"])
def test_unittest_xml_reporting_says_error_expected_failure_and_unexpected_success(device):
    """PyTorch's run_tests --save-xml: both classes (CPU and the device), eleven tests each."""
    report = read(REPORTS / device / "unittest")
    assert counts(report) == {"passed": 8, "failed": 6, "error": 2, "skipped": 2, "xfailed": 2, "xpassed": 2}
    named = {t.name: t.outcome for t in report.failed_tests}
    assert named[f"test_index_error_{device}"] == "error"
    assert named[f"test_fixed_upstream_{device}"] == "xpassed"
    assert named[f"test_mul_overflow_{device}_float32"] == "failed"
    assert f"test_known_broken_{device}" not in named  # an expected failure is no failing test


def test_pytest_says_xfail_xpass_and_a_fixture_s_setup_error():
    report = read(REPORTS / "npu" / "pytest-test-dir.xml")
    named = {t.name: t.outcome for t in report.failed_tests}
    assert named["test_fixed_upstream_npu"] == "xpassed"  # unittest's expectedFailure passing, under pytest
    assert named["test_strict_xfail_passes"] == "xpassed"  # [XPASS(strict)]
    assert named["test_peer_copy"] == "error"  # failed on setup
    assert named["test_index_error_npu"] == "failed"  # pytest: an exception in the test body is a failure
    assert named["test_op_on[matmul-npu]"] == "failed"
    assert report.xfailed == 3  # two expectedFailure instantiations and one pytest.mark.xfail
    assert report.total == 22 + 7


def test_a_module_that_cannot_be_imported_is_one_error_and_no_failing_test():
    report = read(REPORTS / "openreg" / "pytest-collection-error.xml")
    assert counts(report) == {"passed": 0, "failed": 0, "error": 1, "skipped": 0, "xfailed": 0, "xpassed": 0}
    assert report.failed_tests == []


def test_counts_merge_across_shards_outcome_by_outcome():
    merged = read(REPORTS / "spyre" / "unittest")
    merged.merge(read(REPORTS / "openreg" / "pytest-collection-error.xml"))
    assert (merged.error, merged.xpassed, merged.total) == (3, 2, 23)
