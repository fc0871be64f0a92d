"""The one status policy, used by every page, the API and the gate.

1. The latest attempt per (head SHA, backend, job) decides; earlier failed attempts make a
   passing job "flaky", not red.
2. `cancelled` caused by a newer head is "superseded" and counts nowhere.
3. `timed_out` and "never started" are failures of the backend's infrastructure, shown as such.
4. L1 backends have no results, only "dispatched" / "not installed" / "failed to dispatch".
5. Pass rates are over latest attempts; first-attempt pass rate sits beside them as the
   flakiness signal.
6. The relay's health-probe repo (pytorch/crcr-test) passes only on its expected conclusions: a
   job whose name contains `xfail`, `xcancel` or `xtimeout` is built to end `failure`, `cancelled`
   or `timed_out` (reference/hud.md, "Health probe repo"), any other job expects success; for an
   x-probe only its expected conclusion is a pass, plain success included (#8529).

Glyphs follow the main HUD (O X F C T N S Q ? ~); colour is never the only signal."""

from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Protocol


class State(str, Enum):
    SUCCESS = "success"
    FLAKY = "flaky"
    FAILURE = "failure"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    NEVER_STARTED = "never_started"
    RUNNING = "running"
    QUEUED = "queued"
    NEUTRAL = "neutral"
    SKIPPED = "skipped"
    SUPERSEDED = "superseded"
    NO_RESULT = "no_result"
    DISPATCHED = "dispatched"
    NOT_INSTALLED = "not_installed"
    DISPATCH_FAILED = "dispatch_failed"
    DISPATCH_PENDING = "dispatch_pending"
    OVERDUE = "overdue"
    """A running job past its expected duration (hud.overdue); shown, never judged: it counts as pending."""


class Counts(str, Enum):
    """How a state counts in pass rates and summaries."""

    PASS = "pass"
    FAIL = "fail"
    INFRA = "infra"
    PENDING = "pending"
    NONE = "none"


@dataclass(frozen=True)
class StateInfo:
    glyph: str
    label: str
    counts: Counts
    rank: int
    """Precedence when jobs combine into one cell: the highest rank shows."""


STATES: dict[State, StateInfo] = {
    State.FAILURE: StateInfo("X", "failure", Counts.FAIL, 100),
    State.CANCELLED: StateInfo("C", "cancelled", Counts.FAIL, 90),
    State.TIMED_OUT: StateInfo("T", "timed out (infrastructure)", Counts.INFRA, 85),
    State.NEVER_STARTED: StateInfo("Ø", "never started (infrastructure)", Counts.INFRA, 80),
    State.DISPATCH_FAILED: StateInfo("!", "failed to dispatch", Counts.NONE, 75),
    State.OVERDUE: StateInfo("◷", "in progress, overdue (past its expected duration)", Counts.PENDING, 72),
    State.RUNNING: StateInfo("?", "in progress", Counts.PENDING, 70),
    State.QUEUED: StateInfo("Q", "dispatched, not started", Counts.PENDING, 60),
    State.DISPATCH_PENDING: StateInfo("…", "dispatch pending", Counts.NONE, 55),
    State.FLAKY: StateInfo("F", "flaky (passed on retry)", Counts.PASS, 50),
    State.NEUTRAL: StateInfo("N", "neutral", Counts.PASS, 30),
    State.SUCCESS: StateInfo("O", "success", Counts.PASS, 40),
    State.SKIPPED: StateInfo("S", "skipped", Counts.PASS, 20),
    State.DISPATCHED: StateInfo("D", "dispatched (L1: no results)", Counts.NONE, 15),
    State.NOT_INSTALLED: StateInfo("⊘", "App not installed", Counts.NONE, 12),
    State.SUPERSEDED: StateInfo("↷", "superseded by a newer head", Counts.NONE, 10),
    State.NO_RESULT: StateInfo("~", "no result for this commit", Counts.NONE, 0),
}

class StateShown:
    """For anything with a `state`: its glyph and label, as every page shows them."""

    @property
    def glyph(self) -> str:
        return STATES[self.state].glyph

    @property
    def label(self) -> str:
        return STATES[self.state].label


FAILING = {s for s, i in STATES.items() if i.counts in (Counts.FAIL, Counts.INFRA)}
LEGEND = [(state.value, info.glyph, info.label) for state, info in sorted(STATES.items(), key=lambda kv: -kv[1].rank)]


class JobLike(Protocol):
    status: str
    conclusion: str
    ended_by: str
    run_attempt: int
    workflow_name: str
    job_name: str


def conclusion_state(job: JobLike) -> State:
    """A single attempt, on its own."""
    if job.status != "completed":
        return State.RUNNING
    if job.ended_by == "superseded":
        return State.SUPERSEDED
    if job.ended_by == "never_started":
        return State.NEVER_STARTED
    return _CONCLUSION_STATES.get(job.conclusion, State.FAILURE)


_CONCLUSION_STATES = {
    "success": State.SUCCESS, "failure": State.FAILURE, "cancelled": State.CANCELLED,
    "timed_out": State.TIMED_OUT, "neutral": State.NEUTRAL, "skipped": State.SKIPPED,
    "action_required": State.FAILURE, "stale": State.TIMED_OUT,
}


PROBE_EXPECTED = {"xfail": "failure", "xcancel": "cancelled", "xtimeout": "timed_out"}
"""The probe repo's naming convention: a marker in the job name → the conclusion it is built to end with."""


def probe_expected(job_name: str) -> str:
    """The conclusion a probe job is built to end with (the first marker in its name decides)."""
    name = (job_name or "").lower()
    found = [(name.find(marker), conclusion) for marker, conclusion in PROBE_EXPECTED.items() if marker in name]
    return min(found)[1] if found else "success"


def probe_state(job: JobLike) -> State:
    """Health-probe jobs pass exactly when they end as they were built to."""
    state = conclusion_state(job)
    if job.status != "completed" or state == State.SUPERSEDED:
        return state
    return State.SUCCESS if job.conclusion == probe_expected(job.job_name) else State.FAILURE


def job_key(job: JobLike) -> tuple[str, str]:
    return (job.workflow_name, job.job_name)


@dataclass(frozen=True)
class JobVerdict:
    job: JobLike
    state: State
    attempts: int
    first_attempt_state: State


def job_verdicts(jobs: Iterable[JobLike], probe: bool = False) -> list[JobVerdict]:
    """One verdict per job name from all its attempts (one backend, one head SHA). Attempts are
    ordered by (run_attempt, created_at); the last decides."""
    grouped: dict[tuple[str, str], list] = {}
    for job in jobs:
        grouped.setdefault(job_key(job), []).append(job)
    judge = probe_state if probe else conclusion_state
    return [_verdict(sorted(attempts, key=_attempt_order), judge) for attempts in grouped.values()]


def _attempt_order(job):
    return (getattr(job, "created_at", None) is not None, getattr(job, "created_at", None), job.run_attempt)


def _verdict(attempts: list, judge) -> JobVerdict:
    if len(attempts) == 1:  # most jobs; the grid judges tens of thousands per page
        state = judge(attempts[0])
        return JobVerdict(job=attempts[0], state=state, attempts=1, first_attempt_state=state)
    states = [judge(job) for job in attempts]
    latest = states[-1]
    if latest == State.SUCCESS and any(s in FAILING for s in states[:-1]):
        latest = State.FLAKY
    return JobVerdict(job=attempts[-1], state=latest, attempts=len(attempts), first_attempt_state=states[0])


def cell_state(states: Iterable[State]) -> State:
    """Combine job states into one cell: the most severe shows; all-superseded is superseded."""
    states = [s for s in states]
    if not states:
        return State.NO_RESULT
    meaningful = [s for s in states if s != State.SUPERSEDED] or states
    return max(meaningful, key=lambda s: STATES[s].rank)


def dispatch_cell_state(dispatch_states: Iterable[str]) -> State:
    """An L1 backend's cell, or any backend's before its first callback."""
    states = set(dispatch_states)
    if not states:
        return State.NO_RESULT
    if "sent" in states:
        return State.DISPATCHED
    if states & {"pending", "sending", "retrying"}:
        return State.DISPATCH_PENDING
    if "not_installed" in states:
        return State.NOT_INSTALLED
    if "failed" in states:
        return State.DISPATCH_FAILED
    return State.SUPERSEDED


def awaiting_results_state(dispatch_states: Iterable[str]) -> State:
    """A backend that reports results (L2+) with no callback yet for this head: a sent dispatch
    means the work is queued downstream, not "dispatched (L1: no results)"."""
    state = dispatch_cell_state(dispatch_states)
    return State.QUEUED if state == State.DISPATCHED else state


@dataclass(frozen=True)
class Rates:
    passed: int
    failed: int
    infra: int
    pending: int
    first_attempt_passed: int

    @property
    def decided(self) -> int:
        return self.passed + self.failed + self.infra

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.decided if self.decided else None

    @property
    def first_attempt_pass_rate(self) -> float | None:
        return self.first_attempt_passed / self.decided if self.decided else None


def rates(verdicts: Iterable[JobVerdict]) -> Rates:
    """Pass rate over latest attempts; first-attempt pass rate over the same jobs."""
    tally = {Counts.PASS: 0, Counts.FAIL: 0, Counts.INFRA: 0, Counts.PENDING: 0}
    first = 0
    for verdict in verdicts:
        counts = STATES[verdict.state].counts
        if counts in tally:
            tally[counts] += 1
        if counts != Counts.PENDING and counts != Counts.NONE and STATES[verdict.first_attempt_state].counts == Counts.PASS:
            first += 1
    return Rates(tally[Counts.PASS], tally[Counts.FAIL], tally[Counts.INFRA], tally[Counts.PENDING], first)
