"""Reading unittest's verbose output out of a job log, on output the real producer printed."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relay.reference.unittest_log import OUTCOMES, IncompleteLog, clean_line, unittest_log_parse
from tests.relay.unittest_producer import PYTORCH_OPENREG_LOG, github_log, unittest_verbose_output

CLASS = "suite_openreg_ops.TestBinaryUfuncsPRIVATEUSE1"
STORAGE = "suite_openreg_ops.TestOpenRegStorage"


@pytest.fixture(scope="module")
def real_log() -> str:
    return github_log(unittest_verbose_output())


def outcomes(report) -> dict[str, str]:
    return {f"{t.classname}.{t.name}": t.outcome for t in report.tests.values()}


def test_every_outcome_unittest_prints_is_read_from_a_github_job_log(real_log):
    report = unittest_log_parse(real_log)
    assert outcomes(report) == {
        f"{CLASS}.test_add_openreg_float32": "passed",
        f"{CLASS}.test_copy_openreg": "skipped",
        f"{CLASS}.test_div_openreg_float32": "error",
        f"{CLASS}.test_mul_openreg_float32": "failed",
        f"{CLASS}.test_pow_openreg_float16": "xfailed",
        f"{CLASS}.test_sub_openreg_float16": "xpassed",
        f"{STORAGE}.test_printing": "passed",
        f"{STORAGE}.test_resize": "failed",
        f"{STORAGE}.test_subtests": "failed",
    }
    assert report.ran == 9 and sum(report.counts().values()) == 9


def test_a_docstring_or_the_tests_own_output_splitting_the_line_still_gives_its_status():
    log = "\n".join(
        [
            "test_resize (t.TestStorage.test_resize)",
            "Resizing storage keeps its contents. ... FAIL",
            "test_printing (t.TestStorage.test_printing) ... allocator stats: 3 blocks",
            "more output ... and more",
            "ok",
            "test_old (t.TestStorage) ... ok",
            "test_timed (t.TestStorage.test_timed) ... ok (0.012s)",
            'test_skip (t.TestStorage.test_skip) ... skipped "it\'s not there"',
            "Ran 5 tests in 0.010s",
        ]
    )
    assert outcomes(unittest_log_parse(log)) == {
        "t.TestStorage.test_resize": "failed",
        "t.TestStorage.test_printing": "passed",
        "t.TestStorage.test_old": "passed",
        "t.TestStorage.test_timed": "passed",
        "t.TestStorage.test_skip": "skipped",
    }


def test_failures_carry_the_last_line_and_the_traceback_of_their_block(real_log):
    tests = {t.name: t for t in unittest_log_parse(real_log).tests.values()}
    assert tests["test_mul_openreg_float32"].message == "AssertionError: 4 != 5 : upstream broke mul"
    assert tests["test_div_openreg_float32"].message == "RuntimeError: device lost"
    assert tests["test_div_openreg_float32"].stacktrace.startswith("Traceback (most recent call last):")
    assert tests["test_subtests"].message == "AssertionError: 1 == 1"
    assert "Ran 9 tests" not in tests["test_sub_openreg_float16"].stacktrace


def test_as_a_report_each_outcome_is_counted_and_errors_and_unexpected_successes_keep_a_row(real_log):
    report = unittest_log_parse(real_log).test_report()
    counts = (report.passed, report.failed, report.error, report.skipped, report.xfailed, report.xpassed)
    assert (counts, report.total) == ((2, 3, 1, 1, 1, 1), 9)
    failed = {t.name: t for t in report.failed_tests}
    assert {t.outcome for t in report.failed_tests} == {"failed", "error", "xpassed"} and len(failed) == 5
    assert (failed["test_sub_openreg_float16"].outcome, failed["test_div_openreg_float32"].outcome) == (
        "xpassed",
        "error",
    )
    assert failed["test_sub_openreg_float16"].message == "unexpected success"
    assert failed["test_mul_openreg_float32"].classname == CLASS
    assert failed["test_mul_openreg_float32"].file == ""


def test_a_run_that_never_finished_is_refused_rather_than_read_as_passes(real_log):
    cut = real_log[: real_log.index("test_printing")]
    with pytest.raises(IncompleteLog):
        unittest_log_parse(cut)


def test_a_log_without_unittest_output_gives_nothing():
    log = github_log("Collecting numpy (from -r requirements.txt)\nbuild (default) ... done\nAll good\n")
    assert unittest_log_parse(log) is None


def test_several_runs_in_one_log_add_up(real_log):
    report = unittest_log_parse(real_log + real_log.replace("suite_openreg_ops", "suite_two"))
    assert report.ran == 18 and len(report.tests) == 18


def test_github_timestamps_and_colours_are_removed():
    assert clean_line("2026-12-03T15:00:01.1234567Z \x1b[32mtest_a (m.C.test_a) ... ok\x1b[0m\n") == (
        "test_a (m.C.test_a) ... ok"
    )


PYTORCH_LOG = PYTORCH_OPENREG_LOG


def test_pytorchs_own_run_tests_output_is_read_with_every_outcome():
    report = unittest_log_parse(github_log(PYTORCH_LOG.read_text()))
    assert report.ran == 22
    assert report.counts() == {"passed": 8, "failed": 6, "error": 2, "skipped": 2, "xfailed": 2, "xpassed": 2}, (
        "what its own summary says: failures=6, errors=2, skipped=2, expected failures=2, unexpected successes=2"
    )
    tests = {t.name: t for t in report.tests.values()}
    assert tests["test_needs_two_devices_openreg"].outcome == "skipped"
    assert tests["test_fixed_upstream_openreg"].outcome == "xpassed"


def test_a_pytorch_failure_keeps_its_exception_line_and_its_file_but_not_the_scripts_main_module():
    tests = {t.name: t for t in unittest_log_parse(PYTORCH_LOG.read_text()).tests.values()}
    failed = tests["test_npu_format_cast_openreg"]
    assert (failed.classname, failed.file) == ("TestDeviceGenericPRIVATEUSE1", "test/test_device_generic.py")
    assert failed.message == "AssertionError: Scalars are not equal!", "not the repro hint printed after it"
    assert tests["test_index_error_openreg"].message.startswith("IndexError: index 5 is out of bounds")


LOG_LINES = st.sampled_from(
    [
        "test_a (m.C.test_a) ... ok",
        "test_a (m.C.test_a)",
        "test_b (m.C.test_b) ... ",
        "  test_b (m.C.test_b) (i=1) ... FAIL",
        "ok",
        "ERROR",
        "A docstring ... skipped 'x'",
        "=" * 70,
        "-" * 70,
        "FAIL: test_b (m.C.test_b)",
        "ERROR [0.1s]: test_a (m.C.test_a)",
        "AssertionError: boom",
        "Ran 2 tests in 0.1s",
        "",
    ]
)


@pytest.mark.fuzz
@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(lines=st.lists(st.one_of(LOG_LINES, st.text(max_size=40)), max_size=40))
def test_any_log_gives_a_report_nothing_or_incomplete_and_never_crashes(lines):
    try:
        report = unittest_log_parse("\n".join(lines))
    except IncompleteLog:
        return
    if report is not None:
        assert set(report.counts()) == set(OUTCOMES) and sum(report.counts().values()) == len(report.tests)
        assert report.test_report().total == len(report.tests)


def test_a_log_with_more_tests_than_the_cap_is_refused_rather_than_cut(monkeypatch):
    monkeypatch.setattr("relay.reference.unittest_log.MAX_TESTS", 2)
    log = "test_a (m.C.test_a) ... ok\ntest_b (m.C.test_b) ... ok\ntest_c (m.C.test_c) ... FAIL\nRan 3 tests in 0.1s\n"
    with pytest.raises(IncompleteLog, match="more than 2 tests"):
        unittest_log_parse(log)
