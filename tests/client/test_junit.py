"""JUnit XML as the client reads it: failures and errors both fail a test, skips are counted, and
failed-test details are capped to what the relay keeps, so the callback always fits."""

import json
import shutil
from pathlib import Path

import pytest

from relay.callbacks.body import MAX_MESSAGE_BYTES as RELAY_MESSAGE_BYTES
from relay.callbacks.body import text_cap as relay_cut
from tests.client import JUNIT, client_module, huge_junit_write

crcr = client_module()


def read(*names):
    return crcr.junit_read([str(JUNIT / name) for name in names])


def completed_body():
    return {
        "delivery_id": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
        "workflow": {"status": "completed", "failed_tests": []},
    }


# --- counting ----------------------------------------------------------------------------------


def test_a_passing_suite_counts_every_test_as_passed():
    summary = read("pytest_passing.xml")
    assert summary.counts() == {
        "passed": 4,
        "failed": 0,
        "error": 0,
        "skipped": 0,
        "xfailed": 0,
        "xpassed": 0,
        "total": 4,
    }
    assert summary.failures == []


def test_failures_errors_skips_and_xfails_each_count_as_what_they_are():
    summary = read("pytest_failing.xml")
    assert summary.counts() == {
        "passed": 2,
        "failed": 2,
        "error": 1,
        "skipped": 1,
        "xfailed": 1,
        "xpassed": 0,
        "total": 7,
    }
    assert [test.name for test in summary.failures] == [
        "test_batchnorm_eval_xpu_float16",
        "test_embedding_bag_xpu_int64",
        "test_lstm_xpu_float64",
    ]


def test_a_test_that_failed_once_and_passed_on_rerun_counts_as_passed():
    summary = read("pytest_failing.xml")
    assert "test_dropout_xpu" not in [test.name for test in summary.failures]


def test_nested_testsuites_are_walked_down_to_every_testcase():
    summary = read("unittest_nested.xml")
    assert summary.counts() == {
        "passed": 2,
        "failed": 1,
        "error": 1,
        "skipped": 1,
        "xfailed": 0,
        "xpassed": 0,
        "total": 5,
    }


def test_several_reports_add_up_and_a_file_matched_twice_counts_once(tmp_path):
    for name in ("pytest_passing.xml", "pytest_failing.xml"):
        shutil.copy(JUNIT / name, tmp_path / name)
    summary = crcr.junit_read([str(tmp_path / "*.xml"), str(tmp_path / "pytest_passing.xml")])
    assert summary.counts() == {
        "passed": 6,
        "failed": 2,
        "error": 1,
        "skipped": 1,
        "xfailed": 1,
        "xpassed": 0,
        "total": 11,
    }
    assert len(summary.files) == 2


def test_a_recursive_pattern_finds_the_reports_of_every_shard(tmp_path):
    for shard, name in (("shard-1", "pytest_passing.xml"), ("shard-2", "unittest_nested.xml")):
        (tmp_path / "reports" / shard).mkdir(parents=True)
        shutil.copy(JUNIT / name, tmp_path / "reports" / shard / name)
    summary = crcr.junit_read([str(tmp_path / "reports" / "**" / "*.xml")])
    assert summary.counts()["total"] == 9


# --- what a failed test carries ------------------------------------------------------------------


def test_a_failed_test_keeps_its_name_class_file_message_stack_trace_and_hardware_verdict():
    failure = read("pytest_failing.xml").failures[0]
    assert (failure.name, failure.classname, failure.file) == (
        "test_batchnorm_eval_xpu_float16",
        "test.test_nn.TestNNDeviceTypeXPU",
        "test/test_nn.py",
    )
    assert failure.message.startswith("AssertionError: Tensor-likes are not close!")
    assert failure.stacktrace.endswith("test/test_nn.py:5133: AssertionError")
    assert failure.hw_classification == "HW"


def test_a_setup_error_is_a_failed_test_whose_message_says_so():
    error = read("pytest_failing.xml").failures[2]
    assert error.outcome == "error"
    assert error.message.startswith('failed on setup with "RuntimeError: Native API failed.')
    assert "PI_ERROR_OUT_OF_RESOURCES" in error.stacktrace


def test_a_unittest_failure_message_names_its_exception_even_when_only_the_traceback_does():
    failures = read("unittest_nested.xml").failures
    assert [test.message for test in failures] == [
        "AssertionError: False is not true : storage offset mismatch",
        "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 64.00 GiB",
    ]
    assert failures[1].stacktrace.startswith("Traceback (most recent call last):")


# --- caps ----------------------------------------------------------------------------------------


def test_a_huge_report_counts_every_failure_but_details_only_the_first_1000(tmp_path):
    path = huge_junit_write(tmp_path / "huge.xml", failures=1200, message_bytes=3000, stack_bytes=10_000, passes=5)
    summary = crcr.junit_read([str(path)])
    assert summary.counts() == {
        "passed": 5,
        "failed": 1200,
        "error": 0,
        "skipped": 0,
        "xfailed": 0,
        "xpassed": 0,
        "total": 1205,
    }
    assert len(summary.failures) == 1000
    assert (summary.failures[0].name, summary.failures[-1].name) == ("test_case_0", "test_case_999")
    assert all(
        len(test.message.encode()) <= 1024 and len(test.stacktrace.encode()) <= 4096 for test in summary.failures
    )
    assert summary.failures[0].message.endswith("… [truncated]")


def test_texts_are_cut_on_a_character_boundary_and_end_in_a_visible_mark():
    short = crcr.cut("é" * 1000, 1024)  # 2,000 bytes of two-byte characters
    assert len(short.encode()) <= 1024 and short.endswith("… [truncated]")
    assert short.startswith("é" * 500)
    assert crcr.cut("short enough", 1024) == "short enough"


def test_the_relay_leaves_a_message_the_client_cut_as_it_is():
    cut = crcr.cut("ü" * 5000, crcr.MAX_MESSAGE_BYTES)
    assert crcr.MAX_MESSAGE_BYTES == RELAY_MESSAGE_BYTES
    assert relay_cut(cut, RELAY_MESSAGE_BYTES) == (cut, False)


def test_a_body_that_fits_carries_every_failed_test_in_full():
    failures = read("pytest_failing.xml").failures
    data, listed = crcr.body_encode(completed_body(), failures)
    assert listed == 3
    assert json.loads(data)["workflow"]["failed_tests"] == [test.as_json() for test in failures]


def test_1000_long_failures_are_shortened_to_fit_the_relays_2_mb_limit(tmp_path):
    path = huge_junit_write(tmp_path / "huge.xml", failures=1000, message_bytes=3000, stack_bytes=10_000)
    data, listed = crcr.body_encode(completed_body(), crcr.junit_read([str(path)]).failures)
    sent = json.loads(data)["workflow"]["failed_tests"]
    assert len(data) <= 2 * 1024 * 1024 and listed == len(sent) == 1000
    assert all(len(test["stacktrace"].encode()) < 4096 for test in sent)


def test_when_even_short_details_do_not_fit_the_list_loses_its_tail():
    long_named = [
        crcr.FailedTest(name=f"test_{i}_" + "n" * 990, classname="c" * 1000, file="f" * 1000) for i in range(1000)
    ]
    data, listed = crcr.body_encode(completed_body(), long_named)
    assert len(data) <= 2 * 1024 * 1024
    assert 0 < listed < 1000
    assert json.loads(data)["workflow"]["failed_tests"][0]["name"].startswith("test_0_")


# --- what is not a report ------------------------------------------------------------------------


def test_a_truncated_report_is_bad_input_that_names_the_file():
    with pytest.raises(crcr.BadInput, match=r"truncated\.xml is not well-formed JUnit XML") as caught:
        read("pytest_passing.xml", "truncated.xml")
    assert caught.value.exit_code == 3


def test_an_empty_report_is_bad_input_too(tmp_path):
    (tmp_path / "empty.xml").write_text("")
    with pytest.raises(crcr.BadInput, match="empty.xml is not well-formed"):
        crcr.junit_read([str(tmp_path / "empty.xml")])


def test_xml_that_is_not_junit_is_skipped_with_a_warning(capsys):
    summary = read("coverage.xml", "pytest_passing.xml")
    assert summary.counts()["total"] == 4
    assert summary.files == [str(JUNIT / "pytest_passing.xml")]
    assert "coverage.xml is not a JUnit report (its root element is <coverage>)" in capsys.readouterr().err


def test_a_pattern_that_matches_nothing_is_a_warning_and_means_no_test_results(tmp_path, capsys):
    assert crcr.junit_read([str(tmp_path / "reports" / "*.xml")]) is None
    assert "matched no files" in capsys.readouterr().err


REPORTS = Path(__file__).parents[1] / "fixtures" / "pytorch-reports"


def test_the_real_producers_outcomes_are_read_like_the_relay_reads_them():
    """The same six outcomes as relay.reference.junit, on PyTorch's run_tests and pytest output."""
    from relay.reference.junit import junit_parse

    for path in [
        *sorted((REPORTS / "npu" / "unittest").glob("*.xml")),
        REPORTS / "npu" / "pytest-test-dir.xml",
        REPORTS / "openreg" / "pytest-collection-error.xml",
    ]:
        summary = crcr.junit_read([str(path)])
        relay = junit_parse(path.read_bytes())
        assert summary.counts() == {**{o: getattr(relay, o) for o in crcr.OUTCOMES}, "total": relay.total}, path
        assert [(t.name, t.outcome) for t in summary.failures] == [(t.name, t.outcome) for t in relay.failed_tests]


# --- the in-scope suite (hw_classification) ------------------------------------------------------

CLASSIFIED_TESTS = """
import pytest

@pytest.fixture
def accelerator(record_property):
    record_property("hw_classification", "ACCELERATOR")

def test_matmul(accelerator):
    pass

def test_conv(accelerator):
    assert 1 == 2

@pytest.mark.skip(reason="not on this device")
def test_fft(accelerator):
    pass

def test_tokenizer(record_property):
    record_property("hw_classification", "GENERIC")
"""


def test_the_accelerator_classified_tests_that_ran_are_counted_from_pytest_s_own_report(tmp_path):
    """pytest writes record_property into each <testcase>'s <properties>: the two ACCELERATOR
    tests that ran count, the skipped one and the GENERIC one do not."""
    import subprocess
    import sys

    (tmp_path / "test_classified.py").write_text(CLASSIFIED_TESTS)
    report = tmp_path / "junit.xml"
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", "test_classified.py"],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
    )
    counts = crcr.junit_read([str(report)]).counts()
    assert counts == {**counts, "passed": 2, "failed": 1, "skipped": 1, "total": 4, "accelerator_ran": 2}


def test_a_report_without_classification_sends_the_counts_it_always_did():
    assert "accelerator_ran" not in read("pytest_passing.xml").counts()
