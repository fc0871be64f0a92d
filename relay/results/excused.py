"""The upstream-adjusted pass rate: which failed jobs are upstream's to answer for, not the backend's.

A job counts as failed when its latest attempt failed (relay.policy.verdicts, Counts.FAIL). It is
**excused** only when it shows what it failed and every failure it shows is accounted for as
upstream's:

* its list is **complete** (`listed_completely`, the rule the merge gate applies too): it lists at
  least one failed test, the list was not cut, and it lists as many as it counted (failed, errors
  and unexpected passes, relay.models.results.FAILING_OUTCOMES) or, sent without counts as the
  upstream callback action allows, fewer than the action's cap of 1,000. A job that claims 40
  failures and lists none, or lists 1 of its 40, cannot show that every failure is upstream's, and
  a build failure that lists nothing has nothing to compare (issue 45);
* and each listed failure is **shared** (the OpenReg reference failed it too on the same commit,
  relay.results.baseline's comparison), matches an **open known issue of kind upstream**
  (relay.triage), or its test is **muted** on this backend (relay.triage.mutes: a quarantined
  test is left out of the pass rate while it still runs and shows);
* or, only when the project's registry entry allows it (`excuse_triage_verdicts`), the job's own
  triage verdict says `upstream` or `infra` with `high` confidence (the whole job).

A cancelled job tested nothing, and a timed-out or never-started one is the backend's
infrastructure (upstream's timeout criterion counts them apart): neither is ever excused, whatever
it lists or its verdict says. A failure that lists no failed test (a build failure, pytest's
collection error) is never excused either: its mark may read *shared* when the reference's build
failed too, but an empty list cannot show that every failure is upstream's. The adjusted rate
leaves excused jobs out of the count (passed / (decided − excused)): an upstream failure says
nothing about whether the backend would have passed."""

import hashlib
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Max
from django.urls import reverse

from relay.models import (
    FAILING_OUTCOMES,
    MAX_FAILED_TESTS,
    JobRun,
    KnownIssue,
    Level,
    Project,
    TestMuteEvent,
)
from relay.ops.cache import soft_get, soft_set
from relay.policy.links import test_path
from relay.policy.testids import TestIdResolver, report_ids
from relay.policy.verdicts import Rates, State, job_label
from relay.stats.runkinds import Figure, counts, jobs_counted, kind_of, trunk_shas
from relay.triage.classify import triager_load
from relay.triage.matching import Failure
from relay.triage.mutes import Mutes

from .baseline import CellFailures, failures_load, has_baseline
from .cells import (
    cells_for_commits,
    reference_backend,
    registered_backends,
    reported_environment,
)

BASELINE, KNOWN_UPSTREAM, VERDICT, MUTED = "baseline", "known_issue", "triage_verdict", "muted"
CACHE_SECONDS = 90
"""A window's excused list is shared this long: about 2 ms per failing head SHA (measured on the
sandbox), so /crcr's rows and the readiness panel's two windows would otherwise recompute it on
every refresh."""
VERDICT_CATEGORIES = {"upstream", "infra"}


@dataclass(frozen=True)
class Evidence:
    kind: str
    """baseline, known_issue, triage_verdict or muted."""
    label: str
    url: str


@dataclass(frozen=True)
class ExcusedJob:
    sha: str
    job_id: int
    job: str
    evidence: tuple[Evidence, ...]
    dated: datetime | None = None
    """The job's first attempt: the hour it is counted in (hud's stored rollups bucket by it)."""

    @property
    def reason(self) -> str:
        return ", ".join(sorted({e.kind for e in self.evidence}))


@dataclass
class AdjustedRates:
    """Raw rates (from the tallies) and the failed jobs excused in the same window."""

    raw: Rates
    excused: list[ExcusedJob] = field(default_factory=list)
    stored: int | None = None
    """The excused count read from stored rollups (relay.tallies.excused) when the list itself was not
    computed: then `excused` is empty and `listed` is False."""

    @property
    def listed(self) -> bool:
        return self.stored is None

    @property
    def raw_pass_rate(self) -> float | None:
        return self.raw.pass_rate

    @property
    def excused_count(self) -> int:
        """Never more than the failed jobs the raw rates count: the rates may come from rollups a
        minute older than the jobs read here."""
        found = len(self.excused) if self.stored is None else self.stored
        return min(found, self.raw.failed)

    @property
    def counted(self) -> int:
        return self.raw.decided - self.excused_count

    @property
    def adjusted_pass_rate(self) -> float | None:
        return self.raw.passed / self.counted if self.counted > 0 else None

    def pass_rate(self, basis: str) -> float | None:
        return self.raw_pass_rate if basis == "raw" else self.adjusted_pass_rate


# --- one job -------------------------------------------------------------------------------------


def job_excuse(
    job, reported: list, mine: CellFailures, reference: CellFailures | None, triager, verdicts: dict, mutes=None
):
    """The evidence that excuses one failed job, or None when a failure of it stays the backend's."""
    verdict = verdicts.get(job.id)
    if verdict and verdict.get("category") in VERDICT_CATEGORIES and verdict.get("confidence") == "high":
        return (Evidence(VERDICT, f"triage verdict: {verdict['category']}, high confidence", _job_anchor(mine)),)
    if not listed_completely(job, reported):
        return None
    return _tests_excuse(reported, mine, reference, triager, mutes)


def listed_completely(job, reported: list) -> bool:
    """The complete-list rule, the one the pass rate and the merge gate apply: the job lists at
    least one failure, its list was not cut, and either its counts (failed, errors, unexpected
    passes) agree with the list, or it sent no counts at all (the upstream callback action's
    `test_results` is optional) and the list is shorter than the action's cap, where it may have
    been cut without saying so. Nothing else shows every failure. `job` is a DetailJob or a JobRun."""
    if not reported or job.failed_tests_truncated:
        return False
    counts = [getattr(job, f"tests_{outcome}", None) for outcome in FAILING_OUTCOMES]
    if job.tests_total is None and all(count is None for count in counts):
        return len(reported) < MAX_FAILED_TESTS
    return len(reported) == sum(count or 0 for count in counts)


def _tests_excuse(reported: list, mine: CellFailures, reference, triager, mutes=None):
    project = mine.cell.project
    ids = report_ids(reported, project.device_type, reported_environment(reported))
    resolver = TestIdResolver([*mine.tests, *(reference.tests if reference else [])])
    evidence = []
    for test, tid in zip(reported, ids, strict=True):
        tid = resolver.resolve(tid)
        if has_baseline(reference) and reference.failing(tid):
            evidence.append(Evidence(BASELINE, "shared with the reference", _baseline_anchor(mine)))
            continue
        muted = mutes.of(project.id, tid) if mutes else None
        if muted is not None:
            evidence.append(Evidence(MUTED, f"{tid.full} {muted.label}", _test_anchor(tid)))
            continue
        issue = _upstream_issue(triager.classify(Failure(project.id, tid, test.get("message") or "")))
        if issue is None:
            return None
        evidence.append(_issue_evidence(issue))
    return _distinct(evidence)


def _upstream_issue(match):
    issue = match.issue if match is not None else None
    return issue if issue is not None and issue.kind == KnownIssue.Kind.UPSTREAM else None


def _issue_evidence(issue) -> Evidence:
    return Evidence(KNOWN_UPSTREAM, f"known upstream issue #{issue.pk}: {issue.title}", _issue_url(issue))


def _issue_url(issue) -> str:
    return reverse("hud-known-issue", args=[issue.pk])


def _baseline_anchor(mine: CellFailures) -> str:
    return reverse("hud-commit", args=[mine.cell.sha]) + f"#compare-{mine.cell.project.id}"


def _test_anchor(tid) -> str:
    return test_path(tid.full)  # never raises, whatever a stored name holds


def _job_anchor(mine: CellFailures) -> str:
    return reverse("hud-commit", args=[mine.cell.sha]) + f"#backend-{mine.cell.project.id}"


def _distinct(evidence: list) -> tuple:
    return tuple(dict.fromkeys(evidence))


# --- a window --------------------------------------------------------------------------------------


def excused_jobs(project: Project, since: datetime, until: datetime | None = None) -> list[ExcusedJob]:
    """The failed PR/push jobs of `project` dated in [since, until) (a job is dated by its first
    attempt, as the tallies date it) that the rule above excuses. A constant number of queries."""
    reference = reference_backend(registered_backends())
    if project.level == Level.L1 or project.is_reference:
        return []
    shas = _failing_shas(project, since, until)
    if not shas:
        return []
    projects = [project] + ([reference] if reference else [])
    cells = cells_for_commits(shas, projects, detail=True)
    failures = failures_load(cells, with_messages=True)
    triager = triager_load([project.id])
    mutes = Mutes([project.id])
    trunk = trunk_shas(shas)
    verdicts = _verdicts(failures, project) if project.excuse_triage_verdicts else {}
    excused = []
    for sha in shas:
        mine = failures[(sha, project.id)]
        ref = failures.get((sha, reference.id)) if reference else None
        for verdict in mine.cell.verdicts:
            if not _counted_failure(verdict, mine, since, until, sha in trunk):
                continue
            evidence = job_excuse(
                verdict.job, mine.tests_of.get(verdict.job.id, []), mine, ref, triager, verdicts, mutes
            )
            if evidence:
                dated = mine.cell.attempts_of(verdict)[0].created_at
                excused.append(ExcusedJob(sha, verdict.job.id, job_label(verdict.job), evidence, dated))
    return excused


def _failing_shas(project: Project, since: datetime, until: datetime | None) -> list[str]:
    """Heads with a non-passing PR/push attempt in the window: only there can a job have failed."""
    return sorted(set(_failing_rows(since, until).filter(project=project).values_list("head_sha", flat=True)))


def projects_with_failures(since: datetime, until: datetime | None = None) -> set[int]:
    """The backends that can have an excused job in the window (one query): callers that judge
    every backend skip the others without a call each."""
    return set(_failing_rows(since, until).values_list("project_id", flat=True).distinct())


def _failing_rows(since: datetime, until: datetime | None):
    rows = jobs_counted(Figure.EXCUSED).filter(created_at__gte=since, status=JobRun.Status.COMPLETED)
    rows = rows.exclude(conclusion="success")
    return rows.filter(created_at__lt=until) if until is not None else rows


def _counted_failure(verdict, mine: CellFailures, since: datetime, until: datetime | None, trunk: bool) -> bool:
    """A failed PR/push job the window's tally counts that can be excused: latest attempt failed
    (not cancelled: that counts as a failure too, but tested nothing), first attempt dated in it.
    A cell holds no closing dispatch's job (relay.stats.runkinds)."""
    kind = kind_of(verdict.job.event_type, closing=False, trunk=trunk)
    if verdict.state != State.FAILURE or not counts(Figure.EXCUSED, kind, trunk):
        return False
    first = mine.cell.attempts_of(verdict)[0].created_at
    return first >= since and (until is None or first < until)


def _verdicts(failures: dict, project: Project) -> dict[int, dict]:
    ids = [v.job.id for (sha, pid), f in failures.items() if pid == project.id for v in f.cell.verdicts]
    rows = JobRun.objects.filter(pk__in=ids, triage_verdict__isnull=False).values_list("pk", "triage_verdict")
    return dict(rows)


def _version(project: Project) -> str:
    """What the excused list depends on, so a cached list is never one change behind: the newest
    row and update of the backend's and the reference's jobs, and of the known issues."""
    ids = [project.pk, *Project.objects.references().values_list("pk", flat=True)]
    jobs = JobRun.objects.filter(project_id__in=ids).aggregate(Max("id"), Max("updated_at"))
    issues = KnownIssue.objects.aggregate(Max("updated_at"), Count("id"))
    mutes = TestMuteEvent.objects.filter(mute__project=project).aggregate(Max("id"))
    return ":".join(str(v) for v in (*jobs.values(), *issues.values(), *mutes.values()))


def adjusted_rates(project: Project, raw: Rates, since: datetime, until: datetime | None = None) -> AdjustedRates:
    facts = f"{project.excuse_triage_verdicts:d}:{since.isoformat()}:{until or ''}:{_version(project)}"
    key = f"crcr:excused:{project.pk}:{hashlib.sha256(facts.encode()).hexdigest()[:32]}"
    excused = soft_get(key)  # the cache may be down: then every page computes it (relay.ops.cache)
    if excused is None:
        excused = excused_jobs(project, since, until)
        soft_set(key, excused, CACHE_SECONDS)
    return AdjustedRates(raw, excused)
