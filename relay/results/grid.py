"""Cells for a page of commits × backends, as every grid shows them (the main grid, the PR page):
each backend's cell per commit (relay.results.cells), the baseline's marks and upstream-broken
commits (relay.results.baseline), which running jobs are overdue (relay.results.overdue), and
the bisection probes where no counted run tested a backend (relay.results.bisections) and which
failing cells fail on one hardware variant alone (relay.results.variants), from a fixed handful of queries whatever the page's size."""

from dataclasses import dataclass, field

from relay.models import Project
from relay.policy.verdicts import State, shown_state

from .baseline import grid_baseline
from .bisections import probes_on_commits
from .cells import Cell, CellKey, cells_for_commits, reference_backend
from .overdue import overdue_among, running_job_ids
from .variants import cells_failing_alone


@dataclass
class CommitCells:
    cells: dict[CellKey, Cell]
    marks: dict[CellKey, str]
    broken: set[str]
    """Commits where the reference's build or tests failed (relay.results.baseline.upstream_broken)."""
    overdue: set[int]
    """Running job ids past their expected duration."""
    probes: dict = field(default_factory=dict)
    """(sha, backend id) → the bisection probes run there (relay.results.bisections)."""
    alone: dict[CellKey, str] = field(default_factory=dict)
    """Failing cells whose every failing job is on one hardware variant of several (relay.results.variants)."""

    def state(self, sha: str, project_id: int, job: tuple[str, str] | None = None) -> State:
        """A cell's state as shown (a running one past its expected duration is overdue), or one
        job column's."""
        cell = self.cells[(sha, project_id)]
        if job is None:
            return shown_state(cell.state, cell.verdicts, self.overdue)
        verdict = cell.verdict_for(job)
        return shown_state(verdict.state, [verdict], self.overdue) if verdict else State.NO_RESULT

    def mark(self, sha: str, project_id: int) -> str | None:
        return self.marks.get((sha, project_id))

    def probes_only(self, sha: str, project_id: int) -> list:
        """The probes of a cell no counted run of the backend tested (a bisection's culprit inside a
        push, its parent): what it shows instead of nothing, as the commit page does."""
        if self.cells[(sha, project_id)].state != State.NO_RESULT:
            return []
        return self.probes.get((sha, project_id), [])

    def variant_only(self, sha: str, project_id: int) -> str:
        return self.alone.get((sha, project_id), "")


def commit_cells(shas: list[str], projects: list[Project]) -> CommitCells:
    cells = cells_for_commits(shas, projects)
    reference = reference_backend(projects)
    marks, broken = grid_baseline(cells, reference.id if reference else None)
    overdue = overdue_among(running_job_ids([cell.verdicts for cell in cells.values()]))
    return CommitCells(
        cells, marks, broken, overdue, probes_on_commits(shas, [p.id for p in projects]), cells_failing_alone(cells)
    )
