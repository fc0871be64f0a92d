"""The status policy (relay.policy.verdicts) translated to SQL, so the tallies judge jobs in the database
exactly as the pages judge them in Python (a test checks both agree on random data)."""

from dataclasses import dataclass
from functools import cache as memoize

from relay.models import Conclusion, JobRun
from relay.policy.verdicts import FAILING, State, conclusion_state
from relay.stats.runkinds import tab_sql

# --- the status policy, translated to SQL ----------------------------------------------------------

STATE_NUM = {state: number for number, state in enumerate(State)}
NUM_STATE = {number: state for state, number in STATE_NUM.items()}
STATE_SLOTS = 32
"""latest = MAX(id * 32 + state number): the state rides along with the id that orders attempts."""


@dataclass
class _Attempt:
    """A stand-in row, to ask relay.policy.verdicts how it judges a combination of columns."""

    status: str = "completed"
    conclusion: str = ""
    ended_by: str = ""
    run_attempt: int = 1
    workflow_name: str = ""
    job_name: str = ""


def _sql_text(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@memoize
def state_case_sql(alias: str = "j") -> str:
    """CASE expression giving STATE_NUM[conclusion_state(row)] for a JobRun row."""
    num = lambda attempt: STATE_NUM[conclusion_state(attempt)]  # noqa: E731
    whens = [f"WHEN {alias}.status <> 'completed' THEN {num(_Attempt(status='in_progress'))}"]
    for ended_by in JobRun.EndedBy.values:
        verdicts = {num(_Attempt(conclusion=c, ended_by=ended_by)) for c in Conclusion.values}
        if len(verdicts) == 1:  # this ended_by decides on its own, whatever the conclusion says
            whens.append(f"WHEN {alias}.ended_by = {_sql_text(ended_by)} THEN {verdicts.pop()}")
    for value in Conclusion.values:
        whens.append(f"WHEN {alias}.conclusion = {_sql_text(value)} THEN {num(_Attempt(conclusion=value))}")
    fallback = num(_Attempt(conclusion="(unknown)"))
    return f"(CASE {' '.join(whens)} ELSE {fallback} END)"


KIND_SQL = tab_sql("j")
"""relay.stats.runkinds.tab_of in SQL: the tab a row is tallied under."""
_ATTEMPT_SLOTS = 1024
ORDER_SQL = (
    f"(MIN(j.id) OVER (PARTITION BY j.project_id, j.head_sha, {KIND_SQL}, j.workflow_name, j.job_name, j.run_id)"
    f" * {_ATTEMPT_SLOTS} + CASE WHEN j.run_attempt >= {_ATTEMPT_SLOTS} THEN {_ATTEMPT_SLOTS - 1} ELSE j.run_attempt END)"
)
"""relay.policy.verdicts' attempt order as one number: the run's first row id (runs by when they were
first seen), then run_attempt within the run."""

FAILING_NUMS = ", ".join(str(STATE_NUM[s]) for s in sorted(FAILING, key=STATE_NUM.get))
