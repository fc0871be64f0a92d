"""/crcr/<org>/<repo>: one backend's cards, its matrix of head SHAs × jobs, a cell's drill-down,
the environment it reported and its level readiness.

The cards and readiness come from the cached windowed tallies (relay.tallies); the matrix
loads only the rows of one page of head SHAs (≤ 50) and judges them with relay.results.status directly."""

import re
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db.models import Count, Max
from django.utils import timezone

from hud.templatetags.hud_tags import ago, duration, percent
from relay.inputs.linear import linear
from relay.inputs.params import int_param
from relay.levels import criteria as readiness_rules
from relay.levels.demotion import demotion_pr_active
from relay.levels.readiness import LevelHistory, backend_readiness, level_history
from relay.models import FailedTest, JobRun, Project, UpstreamCommit
from relay.policy.run_links import github_job_id
from relay.policy.verdicts import (
    STATES,
    State,
    attempts_in_order,
    conclusion_state,
    job_verdicts,
    probe_state,
    shown_state,
)
from relay.results.advice import Advice, advice_from
from relay.results.baseline import MARK_LABELS, backend_baseline, reference_failures
from relay.results.cells import combined_state, reference_backend, registered_backends
from relay.results.culprits import streaks
from relay.results.excused import AdjustedRates, adjusted_rates
from relay.results.overdue import overdue_job_ids
from relay.results.quality import Quality, quality_of
from relay.results.status import StateShown
from relay.results.tests import flaky_tests, mutes_listed
from relay.stats.runkinds import Figure, counted_q, tab_of, tab_q
from relay.stats.windows import WINDOWS
from relay.tallies.buckets import window_buckets
from relay.tallies.rollups import window_tallies
from relay.tallies.tally import Tally
from relay.triage.mutes import Muted

from .selectors_baseline_history import baseline_history
from .selectors_commit import commit_pr_number
from .selectors_tests import failed_test_dicts_states
from .selectors_triage import expectation_rows

PER_PAGE = 50
FAILED_TESTS_SHOWN = 50
_JOB_FIELDS = (
    "run_id",
    "id",
    "project",
    "event_type",
    "status",
    "conclusion",
    "ended_by",
    "run_attempt",
    "workflow_name",
    "job_name",
    "created_at",
    "head_sha",
    "pr_number",
    "workflow_url",
    "artifact_url",
    "check_run_id",
    "job_id",
    "queue_seconds",
    "execution_seconds",
    "in_progress_at",
    "completed_at",
    "tests_passed",
    "tests_failed",
    "tests_skipped",
    "tests_total",
    "failed_tests_truncated",
    "tests_source",
    "environment",
)


def backend_find(org: str, repo: str) -> Project | None:
    return Project.objects.filter(full_name__iexact=f"{org}/{repo}").first()


# --- links ---------------------------------------------------------------------------------------------


def upstream_commit_url(sha: str) -> str:
    return f"https://github.com/{settings.CRCR_UPSTREAM_REPO}/commit/{sha}"


def upstream_pr_url(number: int) -> str:
    return f"https://github.com/{settings.CRCR_UPSTREAM_REPO}/pull/{number}"


def run_url(job: JobRun, project: Project) -> str:
    """GitHub Actions job pages are <run url>/job/<job id> (relay.policy.run_links.github_job_id); other
    providers get the run URL they reported, as they reported it."""
    job_id = github_job_id(job)
    if job.workflow_url and project.ci_provider == "github" and job_id:
        return f"{job.workflow_url.rstrip('/')}/job/{job_id}"
    return job.workflow_url


# --- shard grouping ------------------------------------------------------------------------------------

_PARENS = linear(r"^(?P<base>.*?) \((?P<inner>[^()]*)\)$")
_SUFFIX = linear(r"^(?P<base>.+?)[-_](?P<index>[0-9]{1,9})$")
"""Both run on job labels from downstream: RE2 (relay.inputs.linear), as `.*?` before a suffix backtracks."""


def shard_of(label: str) -> tuple[str, int] | None:
    """("test", 2) for "test-2", "test_2" or "test (2, 4)"; other parts of a parenthesised
    suffix stay in the group name: "test (default, 2, 4, gpu)" → ("test (default, gpu)", 2)."""
    match = _PARENS.match(label)
    if match:
        parts = [p.strip() for p in match["inner"].split(",")]
        numbers = [int_param(p) for p in parts]
        for i in range(len(parts) - 1):
            index, total = numbers[i], numbers[i + 1]
            if index is not None and total is not None and 1 <= index <= total:
                rest = parts[:i] + parts[i + 2 :]
                return (f"{match['base']} ({', '.join(rest)})" if rest else match["base"]), index
        return None
    match = _SUFFIX.match(label)
    return (match["base"], int(match["index"])) if match else None


def shard_groups(labels) -> dict[str, str]:
    """label → group name, for shard families of two or more that include shard 1 (so "cuda-12"
    next to "cuda-11" stays two columns)."""
    families: dict[str, list] = {}
    for label in labels:
        shard = shard_of(label)
        if shard:
            families.setdefault(shard[0], []).append(shard)
    return {
        label: base
        for base, members in families.items()
        if len(members) >= 2 and any(i == 1 for _, i in members)
        for label in _family_labels(labels, base)
    }


def _family_labels(labels, base: str) -> list[str]:
    return [label for label in labels if (shard_of(label) or ("", 0))[0] == base]


# --- the matrix ----------------------------------------------------------------------------------------


@dataclass
class MatrixColumn:
    key: str
    title: str
    members: list
    grouped: bool = False


@dataclass
class MatrixCell(StateShown):
    column: MatrixColumn
    state: State
    verdicts: list

    @property
    def title(self) -> str:
        if not self.verdicts:
            return f"{self.column.title}: no result for this commit"
        if self.column.grouped:
            return f"{self.column.title} ({len(self.column.members)} shards): worst is {self.label}"
        verdict = self.verdicts[0]
        attempts = f" · {verdict.attempts} attempts" if verdict.attempts > 1 else ""
        return f"{self.column.title}: {self.label}{attempts} · {duration(verdict.job.execution_seconds)}"


@dataclass
class MatrixRow:
    sha: str
    pr_number: int | None
    last_at: datetime
    commit: UpstreamCommit | None
    cells: list
    reference: object | None = None
    """The reference's cell on this head (None on the reference's own page)."""
    mark: str | None = None
    """shared / backend / mixed / no_baseline when this backend fails here."""
    upstream_broken: bool = False
    runs: int = 0
    """Distinct runs against this SHA (several nightly runs and workflows share one row)."""
    workflows: int = 0
    tests_summary: str = ""
    """Test-level status beside the job's: "3 tests failing, all shared with the reference"."""
    variant_only: str = ""
    """The hardware variant alone failing on this head, as the grid and the commit page say."""

    @property
    def mark_label(self) -> str:
        return MARK_LABELS.get(self.mark or "", "")

    @property
    def commit_url(self) -> str:
        return upstream_commit_url(self.sha)

    @property
    def pr_url(self) -> str:
        return upstream_pr_url(self.pr_number) if self.pr_number else ""


@dataclass
class Matrix:
    columns: list
    rows: list
    page: int
    has_next: bool
    grouped: bool
    reference: Project | None = None


def matrix_label(job) -> str:
    """A self-reported (nightly, periodic) job is named with its workflow: several workflows test
    one SHA there, and their `build` jobs are different columns."""
    if job.job_name and tab_of(getattr(job, "event_type", "")) != "pr":
        return f"{job.workflow_name} / {job.job_name}"
    return job.job_name or job.workflow_name


def _page_rows(tab: str):
    """The rows the page counts in this tab, as the tallies count them (relay.stats.runkinds)."""
    return counted_q(Figure.BACKEND_PAGE) & tab_q(tab)


def heads_in_window(project: Project, tab: str, since: datetime) -> list[dict]:
    """Every head SHA with a job in the window, newest activity first: one small row per head
    (a few thousand at most), which gives both the page and the count of heads tested. Runs are
    counted by distinct run id, not by job or attempt (test-infra #8832/#8833)."""
    return list(
        JobRun.objects.filter(_page_rows(tab), project=project, created_at__gte=since)
        .values("head_sha")
        .annotate(
            last=Max("created_at"),
            pr=Max("pr_number"),
            runs=Count("run_id", distinct=True),
            workflows=Count("workflow_name", distinct=True),
        )
        .order_by("-last", "head_sha")
    )


def jobs_by_head(project: Project, tab: str, shas) -> dict[str, list]:
    jobs = JobRun.objects.filter(_page_rows(tab), project=project, head_sha__in=list(shas)).only(*_JOB_FIELDS)
    by_sha: dict[str, list] = {}
    for job in jobs:
        by_sha.setdefault(job.head_sha, []).append(job)
    return by_sha


def head_verdicts(project: Project, jobs: list) -> dict[str, object]:
    """label → JobVerdict, by the one status policy (the probe repo by its own rule)."""
    return {matrix_label(v.job): v for v in job_verdicts(jobs, probe=project.is_health_probe)}


def columns_build(labels, grouped: bool) -> list[MatrixColumn]:
    groups = shard_groups(labels) if grouped else {}
    columns: dict[str, MatrixColumn] = {}
    for label in sorted(labels, key=_natural):
        base = groups.get(label)
        key = f"group:{base}" if base else label
        column = columns.setdefault(key, MatrixColumn(key, base or label, [], grouped=bool(base)))
        column.members.append(label)
    return sorted(columns.values(), key=lambda c: _natural(c.title))


def _natural(text: str):
    # ASCII digits only: "²".isdigit() is true and int("²") fails.
    return [int(part) if part.isascii() and part.isdigit() else part.lower() for part in re.split(r"([0-9]+)", text)]


def matrix_build(project: Project, heads_all: list[dict], tab: str, page: int, grouped: bool) -> Matrix:
    offset = (page - 1) * PER_PAGE
    heads, has_next = heads_all[offset : offset + PER_PAGE], len(heads_all) > offset + PER_PAGE
    jobs = jobs_by_head(project, tab, [h["head_sha"] for h in heads])
    verdicts = {sha: head_verdicts(project, rows) for sha, rows in jobs.items()}
    overdue = overdue_job_ids(v.job for per_sha in verdicts.values() for v in per_sha.values())
    columns = columns_build({label for per_sha in verdicts.values() for label in per_sha}, grouped)
    shas = [h["head_sha"] for h in heads]
    commits = UpstreamCommit.objects.in_bulk(shas, field_name="sha")
    base = backend_baseline(project, shas)
    rows = [
        MatrixRow(
            h["head_sha"],
            h["pr"],
            h["last"],
            commits.get(h["head_sha"]),
            _cells(columns, verdicts.get(h["head_sha"], {}), overdue),
            base.reference_cells.get(h["head_sha"]),
            base.marks.get(h["head_sha"]),
            h["head_sha"] in base.upstream_broken,
            h.get("runs", 0),
            h.get("workflows", 0),
            base.summaries.get(h["head_sha"], ""),
            base.alone.get(h["head_sha"], ""),
        )
        for h in heads
    ]
    reference = base.reference if base.reference_cells else None
    return Matrix(columns, rows, page, has_next, grouped, reference)


def _cells(columns: list, verdicts: dict, overdue: set[int]) -> list[MatrixCell]:
    cells = []
    for column in columns:
        members = [verdicts[label] for label in column.members if label in verdicts]
        cells.append(MatrixCell(column, shown_state(combined_state(members), members, overdue), members))
    return cells


# --- one cell's drill-down -----------------------------------------------------------------------------


@dataclass
class AttemptView(StateShown):
    job: JobRun
    state: State
    url: str
    advice: Advice | None = None
    """The attempt's triage verdict, advisory (relay.results.advice)."""

    @property
    def queue_text(self) -> str:
        return duration(self.job.queue_seconds)

    @property
    def execution_text(self) -> str:
        return duration(self.job.execution_seconds)


@dataclass
class MemberDetail:
    label: str
    state: State
    attempts: list
    failed_tests: list
    tests_text: str

    @property
    def glyph(self) -> str:
        return STATES[self.state].glyph

    @property
    def state_label(self) -> str:
        return STATES[self.state].label


@dataclass
class CellDetail:
    sha: str
    column_title: str
    members: list
    commit: UpstreamCommit | None
    pr_number: int | None

    @property
    def commit_url(self) -> str:
        return upstream_commit_url(self.sha)

    @property
    def pr_url(self) -> str:
        return upstream_pr_url(self.pr_number) if self.pr_number else ""


def cell_detail(project: Project, tab: str, sha: str, column_key: str, grouped: bool) -> CellDetail | None:
    jobs = jobs_by_head(project, tab, [sha]).get(sha, [])
    verdicts = head_verdicts(project, jobs)
    column = next((c for c in columns_build(verdicts, grouped) if c.key == column_key), None)
    if column is None:
        return None
    pr_number = next((j.pr_number for j in jobs if j.pr_number), None)
    commit = UpstreamCommit.objects.filter(sha=sha).first()
    context_pr = pr_number or commit_pr_number(commit)
    members = [_member_detail(project, label, verdicts[label], jobs, context_pr) for label in column.members]
    return CellDetail(sha, column.title, members, commit, pr_number)


def _member_detail(project: Project, label: str, verdict, jobs: list, pr_number: int | None) -> MemberDetail:
    judge = probe_state if project.is_health_probe else conclusion_state
    mine = list(reversed(attempts_in_order(j for j in jobs if matrix_label(j) == label)))  # newest first, by the policy
    verdicts = _triage_verdicts([job.pk for job in mine])
    attempts = [
        AttemptView(
            job,
            judge(job),
            run_url(job, project),
            advice_from(verdicts.get(job.pk), job.pr_number or pr_number, job.head_sha),
        )
        for job in mine
    ]
    latest = verdict.job
    failed = list(FailedTest.objects.filter(job_run_id=latest.pk)[:FAILED_TESTS_SHOWN])
    against = reference_failures(latest.head_sha) if failed and not project.is_reference else None
    failed_test_dicts_states(project, failed, against)
    return MemberDetail(label, verdict.state, attempts, failed, _tests_text(latest))


def _triage_verdicts(job_ids: list[int]) -> dict[int, dict]:
    """The attempts' verdicts, read apart: the matrix loads its jobs without them."""
    rows = JobRun.objects.filter(pk__in=job_ids, triage_verdict__isnull=False).values_list("pk", "triage_verdict")
    return dict(rows)


PRODUCER_COUNTS = (
    ("tests_passed", "passed"),
    ("tests_failed", "failed"),
    ("tests_error", "errors"),
    ("tests_skipped", "skipped"),
    ("tests_xfailed", "xfailed"),
    ("tests_xpassed", "xpassed"),
)
"""The counts as pytest's summary line prints them (torch-spyre counts all six)."""
SHOWN_ALWAYS = {"tests_passed", "tests_failed", "tests_skipped"}


def _tests_text(job) -> str:
    if job.tests_total is None:
        return "no test counts reported"
    text = " · ".join(
        f"{getattr(job, field) or 0:,} {word}"
        for field, word in PRODUCER_COUNTS
        if field in SHOWN_ALWAYS or getattr(job, field)
    )
    text += f" of {job.tests_total:,}"
    text += f" · via {job.get_tests_source_display()}" if job.tests_source else ""
    return text + (" (failed-test list truncated)" if job.failed_tests_truncated else "")


# --- cards, environment, readiness ---------------------------------------------------------------------


@dataclass
class StatCard:
    title: str
    value: str
    detail: str
    ok: bool | None = None
    """True/False colours the card and adds ✓/✗; None leaves it neutral."""

    @property
    def symbol(self) -> str:
        return {True: "✓", False: "✗", None: ""}[self.ok]


def adjusted_card(adjusted: AdjustedRates) -> StatCard:
    excused = len(adjusted.excused)
    return StatCard(
        "Upstream-adjusted pass rate",
        percent(adjusted.adjusted_pass_rate),
        f"{excused:,} failed job{'s' if excused != 1 else ''} excused as upstream's (listed below) · "
        f"{adjusted.raw.passed:,} of {adjusted.counted:,} · target ≥ 90 %",
        readiness_rules.pass_rate_met(adjusted.adjusted_pass_rate),
    )


def stat_cards(tally: Tally, heads: int, window_label: str) -> list[StatCard]:
    rates = tally.rates
    return [
        StatCard(
            "Pass rate",
            percent(rates.pass_rate),
            f"{rates.passed:,} of {rates.decided:,} jobs, latest attempts · target ≥ 90 %",
            readiness_rules.pass_rate_met(rates.pass_rate),
        ),
        StatCard(
            "First-attempt pass rate",
            percent(rates.first_attempt_pass_rate),
            f"{tally.verdicts[State.FLAKY]:,} passed on retry",
        ),
        StatCard("Head SHAs tested", f"{heads:,}", window_label.lower()),
        StatCard(
            "Failures",
            f"{rates.failed:,}",
            f"+ {tally.timed_out:,} timed out (infrastructure) · {tally.never_started:,} dispatch"
            f"{'es' if tally.never_started != 1 else ''} never started (not jobs) · {rates.pending:,} running",
            None if not rates.decided else rates.failed + tally.timed_out == 0,
        ),
        StatCard(
            "Queue time",
            duration(tally.queue.mean),
            f"average · p90 {duration(tally.queue.quantile(0.9))} · dispatch → start",
        ),
        StatCard(
            "Execution time",
            duration(tally.execution.mean),
            f"average · p90 {duration(tally.execution.quantile(0.9))} · start → end",
        ),
        StatCard(
            "Timeout rate",
            percent(tally.timeout_rate),
            f"{tally.timed_out:,} of {rates.decided:,} jobs timed out · target < 1 % · "
            f"{tally.never_started:,} dispatch{'es' if tally.never_started != 1 else ''} never started (not jobs, not counted)",
            readiness_rules.timeout_rate_met(tally.timeout_rate),
        ),
    ]


@dataclass
class Environment:
    values: dict
    job_label: str
    reported_at: datetime | None


def environment_latest(project: Project) -> Environment | None:
    job = (
        JobRun.objects.filter(project=project)
        .exclude(environment={})
        .order_by("-created_at")
        .only("environment", "job_name", "workflow_name", "event_type", "created_at")
        .first()
    )
    if job is None:
        return None
    return Environment({str(k): str(v) for k, v in sorted(job.environment.items())}, matrix_label(job), job.created_at)


@dataclass
class Dashboard:
    project: Project
    window: object
    tab: str
    cards: list
    matrix: Matrix
    environment: Environment | None
    readiness: object
    last_result_text: str
    now: datetime = field(default_factory=timezone.now)
    baseline_days: list = field(default_factory=list)
    streaks: list = field(default_factory=list)
    """Since which commit each job and test failing on the newest trunk commit fails."""
    expectations: list = field(default_factory=list)
    """The backend's published expectations, each with how many trunk commits in a row it passed."""
    adjusted: AdjustedRates | None = None
    """PR/push tab: the window's failed jobs excused as upstream's, for the adjusted pass rate."""
    history: LevelHistory | None = None
    demotion_pr: object = None
    """The backend's active demotion pull request (relay.levels.demotion), or None."""
    quality: Quality | None = None
    """Coverage, flaky share and time to recover over the window (relay.results.quality)."""
    flaky: list = field(default_factory=list)
    """The backend's flaky and broken tests (relay.results.tests.flaky_tests)."""
    mutes: list = field(default_factory=list)
    """The backend's mutes in force, as the mute rule reads them (relay.triage.mutes.Muted)."""

    @property
    def known_heads(self) -> int:
        """Failing heads in the window whose every failure is a known issue or expected."""
        return sum(day.known for day in self.baseline_days)

    @property
    def failing_heads(self) -> int:
        return sum(day.failing for day in self.baseline_days)


def dashboard_build(
    project: Project, window_key: str, tab: str, page: int, grouped: bool, now: datetime | None = None
) -> Dashboard:
    now = now or timezone.now()
    window = WINDOWS[window_key]
    since = start = window_buckets(window.days, now)[0].start
    tally = window_tallies(window.days, now).get((project.pk, tab)) or Tally()
    heads = heads_in_window(project, tab, since)
    cards = stat_cards(tally, len(heads), window.label)
    adjusted = adjusted_rates(project, tally.rates, since) if tab == "pr" and not project.is_reference else None
    if adjusted is not None:
        cards.insert(1, adjusted_card(adjusted))
    if tab != "pr":
        cards.insert(
            3,
            StatCard(
                "Runs",
                f"{sum(h['runs'] for h in heads):,}",
                "distinct runs against those SHAs; each job's latest attempt counts",
            ),
        )
    matrix = matrix_build(project, heads, tab, page, grouped)
    last = ago(tally.last_result_at, now) if tally.last_result_at else "none in this window"
    history = baseline_history(project, heads) if tab == "pr" and not project.is_reference else []
    since = streaks(project) if tab == "pr" else []
    expected = expectation_rows(project) if tab == "pr" else []
    return Dashboard(
        project,
        window,
        tab,
        cards,
        matrix,
        environment_latest(project),
        backend_readiness(project, now),
        last,
        now,
        history,
        since,
        expected,
        adjusted,
        level_history(project),
        demotion_pr_active(project),
        quality_of(project, reference_backend(registered_backends()), start, now) if tab == "pr" else None,
        flaky_tests(project.pk, ("flaky", "broken"), limit=50) if tab == "pr" else [],
        mutes=[Muted(mute) for mute in mutes_listed(project.full_name, active=True)],
    )
