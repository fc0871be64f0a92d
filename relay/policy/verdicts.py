"""The one verdict policy: how attempts, jobs and backends are judged. Every reader uses it —
the HUD's cells and summaries (whose SQL is generated from it), the API, the check runs and
the merge gate — so a rule changes here or nowhere.

1. **The latest attempt** of a job decides: within one run the highest `run_attempt`; across
   runs (a re-dispatch), the run first seen last. Arrival order never decides: a late callback
   of attempt 1 that lands after attempt 2 does not make attempt 1 the latest.
2. A latest attempt that passed after an earlier failed one **passed on retry**: it counts as a pass.
   (Its state keeps the value `flaky` the API has always answered; pages and labels say "passed
   on retry", since *flaky* is a test's state alone: relay.policy.flakiness.HealthState.)
3. `cancelled` because a newer head was pushed is **superseded** and counts nowhere.
4. `timed_out` and "never started" are failures of the backend's **infrastructure**, counted
   apart from test failures; a cancelled job tested nothing and counts as a failure. A dispatch
   nobody answered ("never started") is **no job**: it still blocks the gate, but no rate counts
   it (upstream's rates count jobs), and pages show it beside them.
5. L1 backends have no results, only "dispatched" / "not installed" / "failed to dispatch".
6. Pass rates are over latest attempts; the first-attempt pass rate sits beside them as the
   flakiness signal.
7. The relay's health-probe repo (pytorch/crcr-test) passes only on the conclusions its jobs are
   built to end with: a job whose name contains `xfail`, `xcancel` or `xtimeout` ends `failure`,
   `cancelled` or `timed_out` (reference/hud.md, "Health probe repo"), any other job `success`;
   for an x-probe only its expected conclusion is a pass, plain success included (#8529).
8. For the **reference** (the OpenReg baseline) a job that timed out, never started or was
   cancelled says nothing about upstream: no baseline, never "upstream broken".

Glyphs follow the main HUD (O X F C T N S Q ? ~); colour is never the only signal."""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol


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
    """A running job past its expected duration (relay.results.overdue): shown on cells, never judged here;
    it counts as pending. Last in the enum, so the numbers cached tallies use stay put."""


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
    State.FLAKY: StateInfo("R", "passed on retry", Counts.PASS, 50),
    State.NEUTRAL: StateInfo("N", "neutral", Counts.PASS, 30),
    State.SUCCESS: StateInfo("O", "success", Counts.PASS, 40),
    State.SKIPPED: StateInfo("S", "skipped", Counts.PASS, 20),
    State.DISPATCHED: StateInfo("D", "dispatched (L1: no results)", Counts.NONE, 15),
    State.NOT_INSTALLED: StateInfo("⊘", "App not installed", Counts.NONE, 12),
    State.SUPERSEDED: StateInfo("↷", "superseded by a newer head", Counts.NONE, 10),
    State.NO_RESULT: StateInfo("~", "no result for this commit", Counts.NONE, 0),
}

FAILING = frozenset(s for s, i in STATES.items() if i.counts in (Counts.FAIL, Counts.INFRA))
PASSING = frozenset(s for s, i in STATES.items() if i.counts == Counts.PASS)
PENDING = frozenset(s for s, i in STATES.items() if i.counts == Counts.PENDING)
NOT_A_JOB = frozenset({State.NEVER_STARTED})
"""Dispatches nobody answered: in no rate (rule 4)."""
NO_BASELINE_STATES = frozenset({State.TIMED_OUT, State.NEVER_STARTED, State.CANCELLED})
"""What a reference job that ended so tells about upstream: nothing (rule 8)."""


# --- one attempt ----------------------------------------------------------------------------------


class JobLike(Protocol):
    status: str
    conclusion: str
    ended_by: str
    run_id: str
    run_attempt: int
    workflow_name: str
    job_name: str


_CONCLUSION_STATES = {
    "success": State.SUCCESS,
    "failure": State.FAILURE,
    "cancelled": State.CANCELLED,
    "timed_out": State.TIMED_OUT,
    "neutral": State.NEUTRAL,
    "skipped": State.SKIPPED,
    "action_required": State.FAILURE,
    "stale": State.TIMED_OUT,
}


def conclusion_state(job: JobLike) -> State:
    """A single attempt, on its own."""
    if job.status != "completed":
        return State.RUNNING
    if job.ended_by == "superseded":
        return State.SUPERSEDED
    if job.ended_by == "never_started":
        return State.NEVER_STARTED
    return _CONCLUSION_STATES.get(job.conclusion, State.FAILURE)


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


# --- one job: its attempts ------------------------------------------------------------------------


def job_key(job: JobLike) -> tuple[str, str]:
    return (job.workflow_name, job.job_name)


@dataclass(frozen=True)
class JobVerdict:
    job: JobLike
    """The latest attempt."""
    state: State
    attempts: int
    first_attempt_state: State


def attempts_in_order(attempts: Iterable[JobLike]) -> list:
    """One job's attempts, oldest first (rule 1): runs by when they were first seen, attempts
    within a run by `run_attempt`. `created_at` may be a datetime or a rank from the database."""
    attempts = list(attempts)
    run_first: dict[str, object] = {}
    for job in attempts:
        seen = _seen(job)
        run_first[job.run_id] = min(run_first.get(job.run_id, seen), seen)
    return sorted(attempts, key=lambda j: (run_first[j.run_id], str(j.run_id), j.run_attempt, _seen(j)))


def _seen(job) -> object:
    seen = getattr(job, "created_at", None)
    return seen if seen is not None else 0


def latest_attempt(attempts: Iterable[JobLike]) -> JobLike:
    return attempts_in_order(attempts)[-1]


def job_verdicts(jobs: Iterable[JobLike], probe: bool = False) -> list[JobVerdict]:
    """One verdict per job (workflow, job name) from all its attempts on one head."""
    grouped: dict[tuple[str, str], list] = {}
    for job in jobs:
        grouped.setdefault(job_key(job), []).append(job)
    judge = probe_state if probe else conclusion_state
    return [_verdict(attempts, judge) for attempts in grouped.values()]


def _verdict(attempts: list, judge) -> JobVerdict:
    if len(attempts) == 1:  # most jobs; the grid judges tens of thousands per page
        state = judge(attempts[0])
        return JobVerdict(job=attempts[0], state=state, attempts=1, first_attempt_state=state)
    attempts = attempts_in_order(attempts)
    states = [judge(job) for job in attempts]
    latest = retried_state(states[-1], any(s in FAILING for s in states[:-1]))
    return JobVerdict(attempts[-1], latest, len(attempts), first_attempt_state=states[0])


def retried_state(latest: State, failed_before: bool) -> State:
    """A job that passed after an earlier attempt failed passed on retry (rule 2)."""
    return State.FLAKY if latest == State.SUCCESS and failed_before else latest


def first_attempt_passed(latest: State, first: State) -> bool:
    """Counts toward the first-attempt pass rate: decided, and its first attempt passed."""
    return STATES[latest].counts not in (Counts.PENDING, Counts.NONE) and STATES[first].counts == Counts.PASS


def shown_state(state: State, verdicts, overdue_ids: set[int]) -> State:
    """A cell whose most severe state is "in progress" shows as overdue when one of its running
    jobs is (relay.results.overdue says which are); anything more severe (a failure, say) still shows first."""
    if state != State.RUNNING:
        return state
    return State.OVERDUE if any(v.state == State.RUNNING and v.job.id in overdue_ids for v in verdicts) else state


# --- one backend on one head ----------------------------------------------------------------------


def cell_state(states: Iterable[State]) -> State:
    """Combine job states into one: the most severe shows; all-superseded is superseded."""
    states = list(states)
    if not states:
        return State.NO_RESULT
    meaningful = [s for s in states if s != State.SUPERSEDED] or states
    return max(meaningful, key=lambda s: STATES[s].rank)


def reference_state(states: Iterable[State]) -> State:
    """The reference's cell: jobs that say nothing about upstream (rule 8) are left out, so an
    imported result is never hidden behind a run that did not happen."""
    telling = [s for s in states if s not in NO_BASELINE_STATES]
    return cell_state(telling) if telling else State.NO_RESULT


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


# --- rates ----------------------------------------------------------------------------------------


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
    """Pass rate over latest attempts; first-attempt pass rate over the same jobs (never-started
    dispatches are no jobs: rule 4)."""
    tally = {Counts.PASS: 0, Counts.FAIL: 0, Counts.INFRA: 0, Counts.PENDING: 0}
    first = 0
    for verdict in verdicts:
        if verdict.state in NOT_A_JOB:
            continue
        counts = STATES[verdict.state].counts
        if counts in tally:
            tally[counts] += 1
        first += first_attempt_passed(verdict.state, verdict.first_attempt_state)
    return Rates(tally[Counts.PASS], tally[Counts.FAIL], tally[Counts.INFRA], tally[Counts.PENDING], first)


# --- the merge gate -------------------------------------------------------------------------------


class Gate(str, Enum):
    """One vocabulary for the gate, wherever it is shown (check run, API, pages)."""

    SUCCESS = "success"
    FAILURE = "failure"
    PENDING = "pending"
    SKIPPED = "skipped"
    """The backend counts nowhere on this head (all its work was superseded, or it could not be asked)."""
    NONE = "none"
    """Nothing was dispatched to the backend for this head."""


def gate_backend(
    verdicts: list[JobVerdict], dispatch_states: set[str], unanswered: bool, excused: frozenset[int] = frozenset()
) -> tuple[Gate, str]:
    """One L4 backend on one PR head: failure as soon as any latest attempt failed (failure,
    cancelled, timed out, never started); pending while work is dispatched without a result;
    success when every job passed. Superseded jobs count nowhere; backends that could not be
    asked (not installed, dispatch failed for good) do not block: the author cannot fix them.
    Jobs in `excused` (by id: failures an admin marked as not blocking) count nowhere either, and
    a backend whose only failing jobs are excused passes."""
    if excused and all(v.job.id in excused for v in verdicts):
        return Gate.SUCCESS, "no blocking failure"
    verdicts = [v for v in verdicts if v.job.id not in excused]
    counted = [v for v in verdicts if v.state != State.SUPERSEDED]
    if verdicts and not counted:
        return Gate.SKIPPED, "superseded by a newer head"
    failing = [v for v in counted if v.state in FAILING]
    if failing:
        return Gate.FAILURE, ", ".join(f"{job_label(v.job)} {v.state.value.replace('_', ' ')}" for v in failing)
    if any(v.state in PENDING for v in counted):
        return Gate.PENDING, "jobs running"
    if dispatch_states & {"pending", "sending", "retrying"}:
        return Gate.PENDING, "dispatch not sent yet"
    if unanswered:  # e.g. a reopen re-dispatched the same head: its run (or the sweeper) decides
        return Gate.PENDING, "dispatched; no job has reported yet"
    if counted:
        return Gate.SUCCESS, "all jobs passed"
    if dispatch_states & {"not_installed", "failed", "superseded"}:
        return Gate.SKIPPED, "not dispatched (" + ", ".join(sorted(dispatch_states)).replace("_", " ") + ")"
    return Gate.NONE, "not dispatched for this head"


def gate_overall(backend_states: Iterable[Gate]) -> Gate:
    states = set(backend_states)
    if Gate.FAILURE in states:
        return Gate.FAILURE
    return Gate.PENDING if Gate.PENDING in states else Gate.SUCCESS


def job_label(job: JobLike) -> str:
    return job_key_label((job.workflow_name, job.job_name))


def job_key_label(key: tuple[str, str]) -> str:
    """ "workflow / job" (or the workflow alone): how every page, check run and API names a job."""
    workflow, job = key
    return f"{workflow} / {job}" if job else workflow


_SHORTCODE = re.compile(r"(?<![\w:]):[a-z0-9_+\-]+:(?![\w:])", re.ASCII)
"""Buildkite's emoji syntax in step labels (`:pytorch:`, `:docker:`), which only its own UI draws."""
_PICTOGRAPH = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f]")
"""Emoji pictographs: a browser without an emoji font (a server's Chromium) draws empty boxes."""


def name_shown(name: str) -> str:
    """A CI's job or workflow name as pages show it: text without Buildkite's shortcodes or emoji
    (drawn as empty boxes where no emoji font is), spaces closed up. The name itself, which known
    issues match and the API answers, is untouched."""
    name = str(name or "")
    text = " ".join(_PICTOGRAPH.sub(" ", _SHORTCODE.sub(" ", name)).split())
    return text or " ".join(_PICTOGRAPH.sub(" ", _SHORTCODE.sub(lambda m: m.group()[1:-1], name)).split())
