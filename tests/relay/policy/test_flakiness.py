"""Flakiness as a state machine per (test, backend): what one run says, and the one step it takes."""

from relay.policy.flakiness import (
    BROKEN,
    FAILED,
    FLAKY,
    HEALTHY,
    MIXED,
    PASSED,
    Health,
    Observation,
    counted,
    observe,
    step,
)

HEALTHY_START = Health()


def run(*outcomes, state=HEALTHY_START):
    for outcome in outcomes:
        state = step(state, outcome)
    return state


def test_a_test_that_passed_on_retry_reads_mixed_with_its_pass_on_retry_counted():
    assert observe([["F", "P"]], per_test=True) == Observation(MIXED, pass_on_retry=1, fail_on_retry=0)


def test_a_test_that_failed_again_on_retry_reads_failed_with_its_fail_on_retry_counted():
    assert observe([["F", "F"]], per_test=True) == Observation(FAILED, pass_on_retry=0, fail_on_retry=1)


def test_passing_in_one_shard_and_failing_in_another_on_one_commit_is_mixed():
    assert observe([["F"], ["P"]], per_test=True).outcome == MIXED


def test_a_test_no_job_failed_passed_only_where_the_backend_reported_per_test_results():
    assert observe([], per_test=True).outcome == PASSED
    assert observe([], per_test=False).outcome is None
    assert observe([["F", None]], per_test=False).outcome == FAILED


def test_healthy_becomes_flaky_on_a_commit_where_it_passed_and_failed():
    assert run(MIXED).state == FLAKY


def test_it_becomes_broken_on_the_third_consecutive_failing_commit_not_before():
    assert [run(*[FAILED] * n).state for n in (1, 2, 3)] == [HEALTHY, HEALTHY, BROKEN]
    assert run(FAILED, PASSED, FAILED, FAILED).state == HEALTHY  # a pass breaks the streak
    assert step(Health(), FAILED, broken_after=1).state == BROKEN  # N is configurable


def test_a_run_moves_it_at_most_one_step():
    """A flaky test that fails three commits running goes flaky → broken, not further."""
    assert run(MIXED, FAILED, FAILED, FAILED).state == BROKEN
    assert run(FAILED, FAILED, MIXED).state == FLAKY  # the third commit passed too: flaky, not broken


def test_only_a_streak_of_clean_passes_heals_it():
    flaky = run(MIXED)
    assert run(*[PASSED] * 9, state=flaky).state == FLAKY
    assert run(*[PASSED] * 10, state=flaky).state == HEALTHY
    assert run(*[PASSED] * 9, MIXED, *[PASSED] * 9, state=flaky).state == FLAKY  # a flake restarts the streak
    broken = run(FAILED, FAILED, FAILED)
    assert run(*[PASSED] * 10, state=broken).state == HEALTHY
    assert run(*[PASSED] * 3, state=broken).state == BROKEN


def test_retry_counts_are_evidence_kept_across_steps():
    health = counted(Health(), Observation(MIXED, 2, 1))
    health = run(*[PASSED] * 10, state=step(health, MIXED))
    assert (health.state, health.pass_on_retry, health.fail_on_retry, health.flaky_commits) == (HEALTHY, 2, 1, 1)
