"""Flakiness as a state machine per (test, backend), pure: what one run of a backend on one
upstream commit says of a test, and the one step that moves its state.

**What a run says** (`observe`), from the attempts of the jobs that ran the test on the commit
(a job ran it when one of its attempts reported it failing; a pass is inferred from an attempt
that reported per-test results and did not list it): *mixed* when it both passed and failed
there, *failed* when every attempt that says anything failed it, *passed* when no attempt failed
it and the backend reported per-test results, nothing otherwise. Retries are counted apart: an
attempt that passed it after one that failed (*pass on retry*), an attempt that failed it again
after an earlier one (*fail on retry*).

**One step per run** (`step`): *mixed* makes it **flaky** (from healthy, or from broken: it passes
sometimes); *failed* adds to its failing streak and makes it **broken** once that streak reaches
`broken_after` commits (3 by default: CRCR_TEST_BROKEN_AFTER); *passed* adds to its clean-pass
streak, and only a streak of `healed_after` clean passes (CRCR_TEST_HEALED_AFTER, 10) makes a
flaky or broken test **healthy** again — never time alone, which the machine does not read."""

from dataclasses import dataclass, replace

from django.db.models import TextChoices


class HealthState(TextChoices):
    """The one definition of a (test, backend)'s states, and the only thing the HUD calls
    *flaky*: a job's pass on retry, a declared expectation, a known issue's kind, a bisection
    that did not reproduce and a failure the reference shares are each named otherwise. The
    model's field (relay.models.TestHealth) takes its choices from here; `step` says how a test
    moves between them."""

    HEALTHY = "healthy"
    FLAKY = "flaky"
    """Passed and failed on one commit, until `healed_after` clean passes in a row."""
    BROKEN = "broken"
    """Failed on `broken_after` commits in a row, until `healed_after` clean passes in a row."""


HEALTHY, FLAKY, BROKEN = HealthState.HEALTHY.value, HealthState.FLAKY.value, HealthState.BROKEN.value
PASSED, FAILED, MIXED = "passed", "failed", "mixed"
PASS, FAIL = "P", "F"


@dataclass(frozen=True)
class Health:
    state: str = HEALTHY
    failing_streak: int = 0
    passing_streak: int = 0
    pass_on_retry: int = 0
    fail_on_retry: int = 0
    flaky_commits: int = 0

    @property
    def stepped(self) -> bool:
        """Whether a pass can change it (a healthy test with no streak stays exactly as it is)."""
        return self.state != HEALTHY or self.failing_streak > 0


@dataclass(frozen=True)
class Observation:
    outcome: str | None
    """passed, failed, mixed, or None (the run says nothing of the test)."""
    pass_on_retry: int = 0
    fail_on_retry: int = 0


def observe(sequences: list[list[str | None]], per_test: bool) -> Observation:
    """`sequences`: per job that ran the test, its attempts in order as P, F or None (no word);
    empty when no job failed it. `per_test`: the backend reported per-test results on the commit."""
    seen = [mark for sequence in sequences for mark in sequence if mark]
    if not seen:
        return Observation(PASSED if per_test else None)
    passed_retry = failed_retry = 0
    for sequence in sequences:
        known = [mark for mark in sequence if mark]
        for before, after in zip(known, known[1:]):
            passed_retry += before == FAIL and after == PASS
            failed_retry += after == FAIL
    outcome = MIXED if PASS in seen and FAIL in seen else FAILED if FAIL in seen else PASSED
    return Observation(outcome, passed_retry, failed_retry)


def step(health: Health, outcome: str, broken_after: int = 3, healed_after: int = 10) -> Health:
    """The state after one run that says `outcome` (passed, failed or mixed)."""
    if outcome == MIXED:
        return replace(health, state=FLAKY, failing_streak=0, passing_streak=0, flaky_commits=health.flaky_commits + 1)
    if outcome == FAILED:
        streak = health.failing_streak + 1
        state = BROKEN if streak >= broken_after else health.state
        return replace(health, state=state, failing_streak=streak, passing_streak=0)
    streak = health.passing_streak + 1
    state = HEALTHY if streak >= healed_after else health.state
    return replace(health, state=state, failing_streak=0, passing_streak=streak)


def counted(health: Health, observation: Observation) -> Health:
    """The retries a run saw, added to the counts (they are evidence, never reset by a step)."""
    return replace(
        health,
        pass_on_retry=health.pass_on_retry + observation.pass_on_retry,
        fail_on_retry=health.fail_on_retry + observation.fail_on_retry,
    )
