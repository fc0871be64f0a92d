"""A tally: what one bucket (or a merge of buckets) counts per backend and kind of run."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from relay.policy.verdicts import NOT_A_JOB, STATES, Counts, Rates, State
from relay.tallies.histograms import Histogram

# --- tallies ------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What one backend did in one kind of run over some buckets; merges by addition."""

    verdicts: Counter = field(default_factory=Counter)
    """State → number of jobs whose latest attempt ended so (FLAKY already split from SUCCESS)."""
    first_passed: int = 0
    attempts: int = 0
    in_progress_callbacks: int = 0
    completed_callbacks: int = 0
    swept: Counter = field(default_factory=Counter)
    queue: Histogram = field(default_factory=Histogram)
    execution: Histogram = field(default_factory=Histogram)
    e2e: Histogram = field(default_factory=Histogram)
    last_result_at: datetime | None = None

    def merge(self, other: "Tally") -> None:
        self.verdicts.update(other.verdicts)
        self.swept.update(other.swept)
        for name in ("first_passed", "attempts", "in_progress_callbacks", "completed_callbacks"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.queue.merge(other.queue)
        self.execution.merge(other.execution)
        self.e2e.merge(other.e2e)
        self.last_result_at = latest_of(self.last_result_at, other.last_result_at)

    def count(self, *kinds: Counts) -> int:
        """Jobs whose latest attempt counts so; never-started dispatches are no jobs (relay.policy.verdicts rule 4)."""
        return sum(n for state, n in self.verdicts.items() if STATES[state].counts in kinds and state not in NOT_A_JOB)

    @property
    def rates(self) -> Rates:
        passed, failed, infra, pending = (
            self.count(c) for c in (Counts.PASS, Counts.FAIL, Counts.INFRA, Counts.PENDING)
        )
        return Rates(passed, failed, infra, pending, self.first_passed)

    @property
    def timed_out(self) -> int:
        return self.verdicts[State.TIMED_OUT]

    @property
    def never_started(self) -> int:
        return self.verdicts[State.NEVER_STARTED]

    @property
    def flaky(self) -> int:
        return self.verdicts[State.FLAKY]

    @property
    def callbacks(self) -> int:
        return self.in_progress_callbacks + self.completed_callbacks

    @property
    def timeout_rate(self) -> float | None:
        """Jobs that timed out over decided jobs (upstream's timeout rate); never-started dispatches
        are no jobs and count in neither (shown apart)."""
        decided = self.rates.decided
        return self.timed_out / decided if decided else None


def latest_of(a: datetime | None, b: datetime | None) -> datetime | None:
    return max(a, b) if a and b else a or b


def tally_sum(tallies) -> Tally:
    total = Tally()
    for tally in tallies:
        total.merge(tally)
    return total


def tallies_merge(parts) -> dict:
    """{(project_id, kind): Tally} from several such dicts, without touching the (cached) parts."""
    merged: dict = {}
    for part in parts:
        for key, tally in part.items():
            merged.setdefault(key, Tally()).merge(tally)
    return merged
