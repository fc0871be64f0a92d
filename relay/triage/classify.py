"""Which failures are already accounted for: each failure is *known* (an open known issue of its
backend matches it) or *expected* (the backend's published expectations list it), or neither.
One Triager is loaded per page or task (two queries) and then asked in memory."""

from dataclasses import dataclass, field

from ..models.triage import Expectation, KnownIssue
from .matching import Failure, failure_matches, id_matches

KNOWN, EXPECTED = "known", "expected"
MAX_ISSUES = 1000
"""Open issues loaded per page; far above what any project keeps open."""


@dataclass(frozen=True)
class Match:
    kind: str
    """known or expected."""
    issue: KnownIssue | None = None
    expectation: Expectation | None = None
    lift: bool = False
    """An expected failure (Fail) that the producer reports as passing unexpectedly (xpassed:
    a strict xfail): not a regression, but the expectation should go."""

    @property
    def label(self) -> str:
        if self.issue is not None:
            return f"known issue #{self.issue.pk}: {self.issue.title}"
        if self.lift:
            return f"now passes — lift the expectation ({self.expectation.pattern})"
        return f"expected {'intermittent' if self.expectation.kind == Expectation.Kind.FLAKY else 'failure'} ({self.expectation.pattern})"

    @property
    def url(self) -> str:
        return self.issue.url if self.issue is not None else ""


@dataclass
class Triager:
    issues: list[KnownIssue]
    expectations: dict[int, list[Expectation]] = field(default_factory=dict)
    scopes: dict[int, set[int]] = field(default_factory=dict)
    """issue id → the project ids it is limited to (issues for all backends are absent)."""

    def issue_for(self, failure: Failure, issues=None) -> KnownIssue | None:
        for issue in self.issues if issues is None else issues:
            scope = self.scopes.get(issue.pk)
            if scope is not None and failure.project_id not in scope:
                continue
            if failure_matches(issue.test_patterns, issue.message_contains, failure, issue.cause):
                return issue
        return None

    def expectation_for(self, failure: Failure) -> Expectation | None:
        """Expectations list tests; a job that failed without a test (a build or infrastructure
        failure) is never expected."""
        if isinstance(failure.subject, str):
            return None
        return next(
            (e for e in self.expectations.get(failure.project_id, []) if id_matches(e.pattern, failure.subject)), None
        )

    def classify(self, failure: Failure, outcome: str = "") -> Match | None:
        """`outcome`: the failing test's (failed, error, xpassed); an xpassed test the backend
        expects to fail reads "now passes — lift the expectation"."""
        issue = self.issue_for(failure)
        if issue is not None:
            return Match(KNOWN, issue=issue)
        expectation = self.expectation_for(failure)
        if expectation is None:
            return None
        lift = outcome == "xpassed" and expectation.kind == Expectation.Kind.FAIL
        return Match(EXPECTED, expectation=expectation, lift=lift)


def triager_for(issues: list[KnownIssue]) -> Triager:
    """A triager over exactly these issues (and no expectations)."""
    return Triager(issues, {}, {i.pk: {p.pk for p in i.projects.all()} for i in issues if not i.all_backends})


def issues_load(states=(KnownIssue.State.OPEN,)) -> list[KnownIssue]:
    """The known issues in `states` (open by default), each with the projects it is limited to."""
    return list(KnownIssue.objects.filter(state__in=states).prefetch_related("projects").order_by("id")[:MAX_ISSUES])


def triager_load(project_ids=None, states=(KnownIssue.State.OPEN,)) -> Triager:
    """Open known issues (or those in `states`) and the expectations of the given projects (all
    projects when None)."""
    issues = issues_load(states)
    scopes = {i.pk: {p.pk for p in i.projects.all()} for i in issues if not i.all_backends}
    expectations: dict[int, list[Expectation]] = {}
    rows = (
        Expectation.objects.all()
        if project_ids is None
        else Expectation.objects.filter(project_id__in=list(project_ids))
    )
    for row in rows.order_by("project_id", "line", "id"):
        expectations.setdefault(row.project_id, []).append(row)
    return Triager(issues, expectations, scopes)
