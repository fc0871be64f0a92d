"""A backend's failures over time, split by what the OpenReg baseline says about them: days on
which its failing commits were backend-only (a backend regression) versus shared with the
reference (likely upstream). Bounded to the most recent heads in the window."""

from collections import OrderedDict
from dataclasses import dataclass

from relay.results.baseline import BACKEND, EXPECTED, KNOWN, MIXED, NO_BASELINE, SHARED, baseline_marks

MAX_HEADS = 300
"""The marks need the reference and every backend's cells per commit: cap the commits read."""


@dataclass
class BaselineDay:
    day: object
    tested: int = 0
    backend_only: int = 0
    shared: int = 0
    mixed: int = 0
    no_baseline: int = 0
    known: int = 0
    """Failing only with known issues or expected failures: left out of the other columns."""

    @property
    def failing(self) -> int:
        return self.backend_only + self.shared + self.mixed + self.no_baseline + self.known


def baseline_history(project, heads: list[dict]) -> list[BaselineDay]:
    """`heads` as heads_in_window gives them ({head_sha, last}), newest first."""
    heads = [h for h in heads[:MAX_HEADS] if h.get("head_sha")]
    marks = baseline_marks([h["head_sha"] for h in heads]) if heads else {}
    days: OrderedDict = OrderedDict()
    for head in heads:
        day = days.setdefault(head["last"].date(), BaselineDay(head["last"].date()))
        day.tested += 1
        _count(day, marks.get((head["head_sha"], project.pk)))
    return list(days.values())


def _count(day: BaselineDay, mark: str | None) -> None:
    field = {
        BACKEND: "backend_only",
        SHARED: "shared",
        MIXED: "mixed",
        NO_BASELINE: "no_baseline",
        KNOWN: "known",
        EXPECTED: "known",
    }.get(mark)
    if field:
        setattr(day, field, getattr(day, field) + 1)
