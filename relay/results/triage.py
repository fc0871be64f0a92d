"""Known and expected failures on the HUD's pages: which of a cell's failures an open known
issue or the backend's expectations account for (relay.triage decides; this module applies it to
the baseline's CellFailures), and the "mark as known" link pre-filled from one failure."""

from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

from django.urls import reverse

from relay.policy.testids import TestId, TestTable, report_ids, test_id
from relay.triage.classify import EXPECTED, KNOWN, Match, Triager, triager_load
from relay.triage.matching import Failure

from .cells import reported_environment

KNOWN_MARK, EXPECTED_MARK = KNOWN, EXPECTED


@dataclass
class CellTriage:
    """One failing cell's failures, split into accounted for (by subject) and still open."""

    matches: dict[str, Match] = field(default_factory=dict)
    open_tests: TestTable = field(default_factory=TestTable)
    open_jobs: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """Every failure is known or expected: the cell carries that mark instead of a baseline one."""
        return bool(self.matches) and not self.open_tests and not self.open_jobs

    @property
    def mark(self) -> str:
        return KNOWN_MARK if any(m.kind == KNOWN for m in self.matches.values()) else EXPECTED_MARK

    @property
    def known_count(self) -> int:
        return len(self.matches)

    def match_for(self, subject) -> Match | None:
        return self.matches.get(subject.full if isinstance(subject, TestId) else subject)


def _message(record: dict) -> str:
    return record.get("message") or ""


def cell_triage(failures, triager: Triager) -> CellTriage:
    """`failures` is a relay.results.baseline.CellFailures of a non-reference backend."""
    project_id = failures.cell.project.id
    result = CellTriage()
    for tid, record in failures.tests.items():
        match = triager.classify(Failure(project_id, tid, _message(record)), record.get("outcome") or "")
        if match is None:
            result.open_tests[tid] = record
        else:
            result.matches[tid.full] = match
    for label in failures.job_level:
        match = triager.classify(Failure(project_id, label))
        if match is None:
            result.open_jobs.append(label)
        else:
            result.matches[label] = match
    return result


def cells_triage(failures: dict, reference_id: int | None, triager: Triager | None = None) -> dict:
    """(sha, project id) → CellTriage for every failing backend cell (the reference is the
    baseline, never triaged)."""
    mine = {key: f for key, f in failures.items() if key[1] != reference_id and f.cell.failing}
    if not mine:
        return {}
    triager = triager or triager_load({pid for _, pid in mine})
    return {key: cell_triage(f, triager) for key, f in mine.items()}


def reference_triage(failures: dict, reference_id: int | None, triager: Triager | None = None) -> dict:
    """sha → CellTriage of the reference's failing cells: whether open known issues account for
    every failure of the reference (then the commit is not newly broken upstream: it is known)."""
    mine = {key[0]: f for key, f in failures.items() if key[1] == reference_id and f.cell.failing}
    if not mine:
        return {}
    triager = triager or triager_load({reference_id})
    return {sha: cell_triage(f, triager) for sha, f in mine.items()}


def open_remainder(failures, triage: CellTriage | None):
    """The same CellFailures with only its unaccounted-for failures (for the baseline mark)."""
    if triage is None or not triage.matches:
        return failures
    return replace(failures, tests=triage.open_tests, job_level=list(triage.open_jobs))


def needs_messages(triager: Triager) -> bool:
    return any(issue.message_contains or issue.cause for issue in triager.issues)


# --- "mark as known" ------------------------------------------------------------------------------


def mark_known_url(test: dict | None = None, project_id: int | None = None, sha: str = "", job: str = "") -> str:
    """The new-issue form pre-filled from one failure: its normalised test id (or the job's label
    for a failure without a test), the backend and the commit."""
    params = {}
    if test:
        tid = test.get("identity") or test_id(test.get("name", ""), test.get("classname", ""), test.get("file", ""))
        params["pattern"] = tid.full
        params["title"] = f"{tid.key} fails"
    elif job:
        params["pattern"], params["title"] = job, f"{job} fails"
    if project_id:
        params["project"] = project_id
    if sha:
        params["sha"] = sha
    return reverse("hud-known-issue-new") + "?" + urlencode({k: v for k, v in params.items() if v})


def annotate_failures(cell, tests_by_job: dict[int, list]) -> None:
    """For the tooltip: each failed test of the cell gets `known` (the Match, or None) and its
    "mark as known" link; each failing job without a test gets the same under `job_triage`."""
    triager = triager_load([cell.project.id])
    for verdict in cell.verdicts:
        reported = tests_by_job.get(verdict.job.id, [])
        ids = report_ids(reported, cell.project.device_type, reported_environment(reported))
        for test, tid in zip(reported, ids, strict=True):
            test["identity"] = tid
            test["known"] = triager.classify(
                Failure(cell.project.id, tid, test.get("message") or ""), test.get("outcome") or ""
            )
            test["mark_known_url"] = mark_known_url(test, cell.project.id, cell.sha)
