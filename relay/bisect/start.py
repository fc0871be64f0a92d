"""When to bisect: a test fails backend-only on a trunk commit (the baseline's rule: the reference
passes it there), the test store does not call it flaky on that backend, its streak there began
at C (its first failing commit) after its last pass on P, and P..C spans more than one
first-parent commit. The tests with the same P and C went red together: one bisection covers them
all. A backend bisects only when it opted in, one bisection at a time, and only when today's
budget covers the whole search. A failure seen again on a later commit is the same streak: its
bisection (from the same P) is not started twice."""

import logging
import math
from collections import defaultdict

from django.db import IntegrityError, transaction

from relay.policy.links import short_sha
from relay.stats.runkinds import on_trunk, trunk_commits

from ..models import Bisection, HealthState, Project, UpstreamCommit
from ..results.baseline import commit_baseline
from ..results.tests import health_of, identity_find, streaks_of
from .probes import budget_left
from .ranges import RangeUnavailable, first_parent_range

logger = logging.getLogger(__name__)


def probes_needed(k: int) -> int:
    """Dispatches a range of k commits costs: ceil(log2 k) to search, 2 to verify."""
    return math.ceil(math.log2(k)) + 2 if k > 1 else 0


def bisection_consider(project_id: int, sha: str) -> Bisection | None:
    """The bisection the backend's results on `sha` start, if they start one."""
    project = Project.objects.filter(pk=project_id, active=True, bisect_enabled=True).first()
    commit = trunk_commits().filter(sha=sha).first()
    if project is None or commit is None or Bisection.objects.running().filter(project=project).exists():
        return None
    (good, bad), tests = _red_together(project, commit)
    if not tests:
        return None
    try:
        commits = first_parent_range(good, bad)
    except RangeUnavailable as exc:
        logger.warning("no bisection of %s on %s: %s", project, short_sha(bad), exc)
        return None
    if len(commits) < 2:
        return None  # the commit that broke it is C itself: nothing to search
    return _bisection_open(project, UpstreamCommit.objects.get(sha=bad), good, commits, tests)


def _red_together(project: Project, commit: UpstreamCommit) -> tuple[tuple[str, str], list[dict]]:
    """((P, C), the tests) of the largest group of new backend-only failures sharing P and C."""
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for test_id, job, good, bad in new_backend_only(project, commit):
        groups[good, bad].append({"test_id": test_id, "job": job})
    if not groups:
        return ("", ""), []
    span = max(groups, key=lambda g: len(groups[g]))
    return span, groups[span]


def new_backend_only(project: Project, commit: UpstreamCommit):
    """(test id, job, last pass, first failing commit) of each backend-only failure on `commit`
    worth a bisection: not flaky, with a last pass, and not already covered by a bisection from
    that last pass."""
    comparison = commit_baseline(commit.sha).for_backend(project.pk)
    if comparison is None:
        return
    for test in comparison.backend_only:
        identity = identity_find(test.test_id)
        if identity is None or _flaky(identity, project):
            continue
        streak = streaks_of(identity, [project.pk], before=commit).get(project.pk)
        if streak is None or not streak.last_passing or _covered(project, streak.last_passing, test.test_id):
            continue
        if on_trunk(streak.first_failing):
            yield test.test_id, test.job, streak.last_passing, streak.first_failing


def _flaky(identity, project: Project) -> bool:
    health = health_of(identity, project.pk)
    return health is not None and health.state == HealthState.FLAKY


def _covered(project: Project, good: str, test_id: str) -> bool:
    tests = Bisection.objects.filter(project=project, good_sha=good).values_list("tests", flat=True)
    return any(test["test_id"] == test_id for listed in tests for test in listed)


def _bisection_open(project: Project, commit: UpstreamCommit, good: str, commits: list[str], tests: list[dict]):
    """The new bisection; ended at once as over budget when today's probes cannot cover it."""
    needed, left = probes_needed(len(commits)), budget_left(project)
    fields = {
        "project": project,
        "good_sha": good,
        "bad_sha": commit.sha,
        "branch": commit.branch,
        "commits": commits,
        "tests": tests,
        "bad_index": len(commits),
    }
    if needed > left:
        note = f"needs {needed} probes, {left} of today's {project.bisect_daily_budget} left"
        return Bisection.objects.create(**fields, state=Bisection.State.OVER_BUDGET, note=note)
    try:
        with transaction.atomic():
            return Bisection.objects.create(**fields)
    except IntegrityError:
        return None  # another worker opened this backend's one running bisection first
