"""The quality figures a backend is judged by (the accelerator group's criteria, as torch-spyre's
CI plan quotes them), over a window, each with its trend (the window's first half against its
second), from the test store (relay/models/teststore.py):

* **coverage**: of the tests the reference ran on the commits both ran, the share this backend
  ran (tests reported minus skipped, latest attempts; capped at 100 % per commit). Where both
  sides' reports classify their tests (`hw_classification`, counted by our client and the
  reference import as `accelerator_ran`), a commit counts over the ACCELERATOR-classified tests
  only, the in-scope suite; elsewhere over everything the reference ran, and the detail says how
  many commits were counted which way. Target: 80 % (the plan's path is 5 % → 80 % of in-scope tests).
* **flaky share**: the backend's tests in state *flaky* now (relay.policy.flakiness) over the
  tests it ran on its newest commit in the window; the trend counts the tests that *became*
  flaky in each half. The count shows beside the share: 2 of 5,421 is not "0.0 %". Target: under 5 %.
* **time to recover**: for each red streak of the backend's tested commits (in the order it ran
  them) that started in the window, the time from its first red commit to the first green one
  after it; the median over the recovered streaks. A streak still red is the longest time to
  recover there is, not none: while one is open the figure is its age so far (at least the
  median), and it misses the target once that is older than it. Target: 3 days at most.

A figure without data has no verdict (`met` None): "no data" is never a target met.

**Series** (`QualityFigure.series`): each figure's trend as points, one per step of the range (3 hours
in a day, a day up to 30 days, a week beyond), read from the rows the figure was computed from:
coverage over the commits of each step, the tests that became flaky in it, and the time to
recover of the streaks that started in it (an open one at its age so far)."""

from collections import namedtuple
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from statistics import median

from relay.models import HealthState, TestedCommit, TestHealth
from relay.stats.runkinds import Figure, commits_q

COVERAGE_TARGET = 0.80
FLAKY_TARGET = 0.05
RECOVER_TARGET = timedelta(days=3)


@dataclass
class QualityFigure:
    key: str
    label: str
    value: float | None
    """A share (0–1) or, for time to recover, days; None: no data in the window."""
    target: str
    met: bool | None
    earlier: float | None = None
    later: float | None = None
    detail: str = ""
    unit: str = "%"
    count: int | None = None
    """For a share of tests: how many (the flaky tests), beside `of`, how many ran."""
    of: int | None = None
    open: bool = False
    """Time to recover: a red streak is still open, so `value` is its age so far."""
    series: list = field(default_factory=list)
    """[(step start, value or None)] over the range: the figure's trend, point by point."""
    series_label: str = ""
    """What a point of the series measures."""

    @property
    def counted(self) -> str:
        """ "2 of 5,421": what a share of tests is made of, so a small one never reads only "0.0 %"."""
        return "" if self.count is None or not self.of else f"{self.count:,} of {self.of:,}"

    @property
    def seconds(self) -> float | None:
        """A figure in days, in seconds (the HUD's one duration format reads seconds)."""
        return None if self.value is None or self.unit != "days" else self.value * 86400

    @property
    def trend(self) -> str:
        """ "↑", "↓" or "→" from the first half to the second (text, not only colour)."""
        if self.earlier is None or self.later is None:
            return ""
        if abs(self.later - self.earlier) < 1e-9:
            return "→"
        return "↑" if self.later > self.earlier else "↓"


@dataclass
class Quality:
    project_id: int
    figures: list[QualityFigure] = field(default_factory=list)

    def figure(self, key: str) -> QualityFigure:
        return next(f for f in self.figures if f.key == key)


def quality_of(project, reference, since: datetime, until: datetime) -> Quality:
    """The three figures of one backend over [since, until), each with its series."""
    rows = _commits(project, since, until)
    middle = since + (until - since) / 2
    steps = Steps(since, until)
    return Quality(
        project.id,
        [
            coverage(rows, _commits(reference, since, until) if reference else [], middle, steps),
            flaky_share(project, rows, since, middle, until, steps),
            time_to_recover(rows, middle, until, steps),
        ],
    )


class Steps:
    """The range cut into the series' steps: 3 hours in a day, a day up to 30 days, a week beyond."""

    def __init__(self, since: datetime, until: datetime):
        span = until - since
        self.size = (
            timedelta(hours=3) if span <= timedelta(days=1) else timedelta(days=1 if span <= timedelta(days=30) else 7)
        )
        count = max(1, -(-span // self.size))
        self.since, self.starts = since, [since + self.size * n for n in range(count)]

    def series(self, items, value) -> list:
        """[(step start, value(items in the step))] for (when, item) pairs."""
        grouped: dict[int, list] = {}
        for when, item in items:
            grouped.setdefault(min(len(self.starts) - 1, max(0, (when - self.since) // self.size)), []).append(item)
        return [(start, value(grouped.get(n, []))) for n, start in enumerate(self.starts)]


Tested = namedtuple("Tested", "sha created_at tests_ran failing accelerator_ran")


def _commits(project, since: datetime, until: datetime) -> list[Tested]:
    """The backend's finished tested commits, oldest first (relay.stats.runkinds: trunk commits)."""
    rows = TestedCommit.objects.filter(commits_q(Figure.QUALITY), project=project, created_at__gte=since)
    rows = rows.filter(created_at__lt=until)
    rows = rows.exclude(stepped_jobs=[]).order_by("created_at", "id")
    return [Tested._make(values) for values in rows.values_list(*Tested._fields)]


def _covered(mine: Tested, theirs: Tested) -> tuple[int, int, bool]:
    """(tests of the reference's this backend ran, the reference's, over ACCELERATOR only)."""
    if mine.accelerator_ran is not None and theirs.accelerator_ran:
        return min(mine.accelerator_ran, theirs.accelerator_ran), theirs.accelerator_ran, True
    return min(mine.tests_ran or 0, theirs.tests_ran), theirs.tests_ran, False


def coverage(
    mine: list[Tested], reference: list[Tested], middle: datetime, steps: Steps | None = None
) -> QualityFigure:
    theirs = {row.sha: row for row in reference if row.tests_ran}
    counted = [(row.created_at, *_covered(row, theirs[row.sha])) for row in mine if row.sha in theirs]
    pairs = [(when, ran, of) for when, ran, of, _ in counted]
    in_scope = sum(1 for *_, accelerator in counted if accelerator)

    def share(items) -> float | None:
        total = sum(r for _, _, r in items)
        return sum(b for _, b, _ in items) / total if total else None

    value = share(pairs)
    return QualityFigure(
        "coverage",
        "Coverage of the reference's tests",
        value,
        f"≥ {COVERAGE_TARGET:.0%}",
        None if value is None else value >= COVERAGE_TARGET,
        share([p for p in pairs if p[0] < middle]),
        share([p for p in pairs if p[0] >= middle]),
        f"{len(pairs)} commit{'s' if len(pairs) != 1 else ''} both ran with per-test counts"
        + (f", {in_scope} of them over the ACCELERATOR-classified tests" if in_scope else ""),
        series=steps.series(((p[0], p) for p in pairs), share) if steps else [],
        series_label="coverage of the commits of the step",
    )


def flaky_share(
    project, mine: list[Tested], since: datetime, middle: datetime, until: datetime, steps: Steps | None = None
) -> QualityFigure:
    flaky = TestHealth.objects.filter(project=project, state=HealthState.FLAKY)
    count = flaky.count()
    ran = next((row.tests_ran for row in reversed(mine) if row.tests_ran), None)
    value = count / ran if ran else None
    became = list(flaky.filter(since__gte=since, since__lt=until).values_list("since", flat=True))
    return QualityFigure(
        "flaky_share",
        "Flaky tests",
        value,
        f"< {FLAKY_TARGET:.0%}",
        None if value is None else value < FLAKY_TARGET,
        float(sum(1 for when in became if when < middle)) if ran else None,
        float(sum(1 for when in became if when >= middle)) if ran else None,
        f"{count} flaky of {ran:,} run" if ran else f"{count} flaky; no per-test counts in the window",
        count=count,
        of=ran,
        series=steps.series(((when, when) for when in became), lambda items: float(len(items))) if steps else [],
        series_label="tests that became flaky in the step",
    )


def time_to_recover(mine: list[Tested], middle: datetime, until: datetime, steps: Steps | None = None) -> QualityFigure:
    recovered, red_since = [], None
    for when, failing in ((row.created_at, row.failing) for row in mine):
        if failing and red_since is None:
            red_since = when
        elif not failing and red_since is not None:
            recovered.append((red_since, when - red_since))
            red_since = None
    open_since = red_since

    def days(items) -> float | None:
        return median(d.total_seconds() / 86400 for _, d in items) if items else None

    value = days(recovered)
    if open_since is not None:
        value = max(value or 0.0, (until - open_since).total_seconds() / 86400)
    met = None if value is None else value <= RECOVER_TARGET.total_seconds() / 86400
    detail = f"{len(recovered)} recovered streak{'s' if len(recovered) != 1 else ''}"
    if open_since is not None:
        detail += f"; red since {open_since:%Y-%m-%d %H:%M} UTC, not recovered yet"
    return QualityFigure(
        "time_to_recover",
        "Time to recover",
        value,
        "≤ 3 days",
        met,
        days([r for r in recovered if r[0] < middle]),
        days([r for r in recovered if r[0] >= middle]),
        detail,
        unit="days",
        open=open_since is not None,
        series=steps.series(_streaks(recovered, open_since, until), days) if steps else [],
        series_label="time to recover of the streaks that started in the step (an open one at its age)",
    )


def _streaks(recovered: list, open_since: datetime | None, until: datetime) -> list:
    """(start, (start, duration)) of each streak, the open one at its age so far."""
    streaks = recovered + ([(open_since, until - open_since)] if open_since is not None else [])
    return [(start, (start, length)) for start, length in streaks]
