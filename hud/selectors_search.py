"""The top bar's search box: what a PR number, a SHA prefix, a backend name, a test (its id or
name, from the test store), a PR's author or words of a PR's or commit's title refer to."""

from dataclasses import dataclass, field

from django.db.models import Q

from relay.inputs.linear import linear
from relay.models import Delivery, Dispatch, JobRun, Project, PullRequest, UpstreamCommit
from relay.policy.links import backend_path, commit_path, pr_path, test_path
from relay.results.heads import CANDIDATES, commits_by_prefix
from relay.results.tests import identities_matching
from relay.stats.runkinds import trunk_commits

MAX_QUERY = 140
MIN_SHA_PREFIX = 4
MIN_TITLE_WORDS = 3
"""Characters a title search needs: fewer match nearly everything."""
TITLE_HITS = 25
PR_NUMBER = linear(r"^(?:#|pr\s*#?\s*)?([0-9]{1,9})$", case_sensitive=False)
"""RE2 (relay.inputs.linear): the spaces around `#` can be split two ways, which backtracks."""
SHA_PREFIX = linear(rf"^[0-9a-f]{{{MIN_SHA_PREFIX},40}}$", case_sensitive=False)


@dataclass
class SearchResult:
    query: str
    url: str = ""
    """Where to go when the query names exactly one thing."""
    commits: list = field(default_factory=list)
    backends: list = field(default_factory=list)
    prs: list = field(default_factory=list)
    """Pull requests by that author, or whose title holds the words (newest first)."""
    titled: list = field(default_factory=list)
    """Trunk commits whose title holds the words (newest first)."""
    tests: list = field(default_factory=list)
    """Test identities (relay.models.TestIdentity) whose id or name matches."""
    pr_number: int | None = None
    """A PR number the relay has never seen (shown on the not-found page)."""

    @property
    def found(self) -> bool:
        return bool(self.url or self.commits or self.backends or self.tests or self.prs or self.titled)


def search(query: str) -> SearchResult:
    """A PR number ("151999", "#151999"), then a SHA prefix, then a backend (full name, display
    name or device, case-insensitive), then a test (its id, or a part of its name). One match is
    a destination; several are a list."""
    query = query.strip()
    result = SearchResult(query)
    pr = PR_NUMBER.match(query)
    if pr and pr_known(int(pr.group(1))):
        result.url = pr_path(int(pr.group(1)))
        return result
    result.pr_number = int(pr.group(1)) if pr else None
    if SHA_PREFIX.match(query):
        result.commits = commits_by_prefix(query)
    if not result.commits:
        result.backends = backends_matching(query)
    if not (result.commits or result.backends):
        result.tests, result.prs, result.titled = identities_matching(query), prs_matching(query), commits_titled(query)
    return _settle(result)


def _settle(result: SearchResult) -> SearchResult:
    if len(result.commits) == 1:
        result.url = commit_path(result.commits[0].sha)
    elif len(result.backends) == 1:
        result.url = backend_path(result.backends[0].full_name)
    elif len(result.prs) + len(result.titled) + len(result.tests) == 1:
        result.url = _only_one(result)
    return result


def _only_one(result: SearchResult) -> str:
    if result.prs:
        return pr_path(result.prs[0].number)
    if result.titled:
        return commit_path(result.titled[0].sha)
    return test_path(result.tests[0].identity)


def prs_matching(text: str) -> list[PullRequest]:
    """By author login (exact, case-insensitive, with or without @) or words of the title."""
    login = text.removeprefix("@")
    match = Q(author__iexact=login) if login else Q(pk__in=[])
    if len(text) >= MIN_TITLE_WORDS:
        match |= Q(title__icontains=text)
    return list(PullRequest.objects.filter(match).order_by("-number")[:TITLE_HITS])


def commits_titled(text: str) -> list[UpstreamCommit]:
    if len(text) < MIN_TITLE_WORDS:
        return []
    commits = trunk_commits().filter(title__icontains=text)
    return list(commits.order_by("-landed_at")[:TITLE_HITS])


def pr_known(number: int) -> bool:
    return any(
        model.objects.filter(pr_number=number).exists() for model in (UpstreamCommit, JobRun, Dispatch, Delivery)
    )


def backends_matching(text: str) -> list[Project]:
    projects = Project.objects.filter(active=True)
    exact = list(projects.filter(full_name__iexact=text))
    if exact or not text:
        return exact
    loose = Q(full_name__icontains=text) | Q(display_name__icontains=text) | Q(device__iexact=text)
    return list(projects.filter(loose).order_by("level", "position", "full_name")[:CANDIDATES])
