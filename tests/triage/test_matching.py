"""The one matching rule: globs over normalised test ids, capped, never a user regex."""

import pytest

from relay.policy.testids import test_id
from relay.triage.expectations import ExpectationsError, expectations_parse, passing_streak
from relay.triage.matching import Failure, PatternError, failure_matches, id_matches, pattern_check, patterns_check

XPU_ADDMM = test_id("test_addmm_xpu_float32", "test.test_ops.TestCommonXPU", "test/test_ops.py")


def test_it_matches_the_full_id_and_the_module_less_key():
    assert XPU_ADDMM.full == "test_ops.TestCommon.test_addmm_float32"
    assert id_matches("test_ops.TestCommon.test_addmm*", XPU_ADDMM)
    assert id_matches("TestCommon.test_addmm*", XPU_ADDMM)
    assert not id_matches("test_nn.TestCommon.test_addmm*", XPU_ADDMM)


def test_a_device_instantiated_name_matches_its_upstream_pattern_on_every_device():
    rocm = test_id("test_addmm_cuda_float32", "TestCommonCUDA", "test/test_ops.py")
    assert id_matches("TestCommon.test_addmm_float32", rocm) and id_matches("TestCommon.test_addmm_float32", XPU_ADDMM)


def test_a_job_label_matches_a_failure_without_a_test():
    assert id_matches("ci / build*", "ci / build (linux)")


def test_both_matchers_must_hold_when_both_are_given():
    failure = Failure(1, XPU_ADDMM, "RuntimeError: UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY")
    assert failure_matches(["TestCommon.*"], "OUT_OF_DEVICE_MEMORY", failure)
    assert not failure_matches(["TestCommon.*"], "Tensor-likes", failure)
    assert failure_matches([], "OUT_OF_DEVICE_MEMORY", failure)
    assert not failure_matches([], "", failure)


@pytest.mark.parametrize("bad", ["", "*", "**?", "x" * 201, "test_(a|b)+$", "a\nb"])
def test_it_refuses_patterns_that_are_empty_match_everything_are_too_long_or_look_like_regex(bad):
    with pytest.raises(PatternError):
        pattern_check(bad)


def test_it_caps_the_number_of_patterns():
    with pytest.raises(PatternError):
        patterns_check([f"TestX.test_{i}" for i in range(21)])


def test_a_glob_with_many_stars_stays_fast_on_a_long_subject():
    import time

    pattern = "a*" * 40 + "b"
    started = time.monotonic()
    assert not id_matches(pattern, "a" * 1000)
    assert time.monotonic() - started < 1.0


def test_it_parses_the_drm_ci_style_expectations_file():
    entries = expectations_parse(
        "# xpu expectations\nTestCommon.test_addmm*,Fail\n\nTestNN.test_conv2d,Flake  # driver 1.3\nTestX.test_y,Crash\n"
    )
    assert [(p, k, r) for p, k, r, _ in entries] == [
        ("TestCommon.test_addmm*", "fail", ""),
        ("TestNN.test_conv2d", "flaky", "driver 1.3"),
        ("TestX.test_y", "fail", ""),
    ]


@pytest.mark.parametrize(
    "text, problem",
    [
        ("TestA.test_b", "line 1"),
        ("TestA.test_b,Maybe", "unknown kind"),
        ("A.b,Fail\nA.b,Flake", "twice"),
        ("*,Fail", "every test"),
    ],
)
def test_a_bad_expectations_line_is_named(text, problem):
    with pytest.raises(ExpectationsError, match=problem):
        expectations_parse(text)


def test_the_passing_streak_counts_decided_passes_and_skips_commits_without_a_result():
    assert passing_streak(["pass", "unknown", "pass", "pass", "fail", "pass"]) == 3
    assert passing_streak(["fail", "pass"]) == 0
