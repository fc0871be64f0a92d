"""The top bar's search box: what a PR number, a SHA prefix, a backend name or a test (its id or
name, from the test store) refers to."""

import re
from dataclasses import dataclass, field
from urllib.parse import quote

from django.db.models import Q

from relay.models import Delivery, Dispatch, JobRun, Project, UpstreamCommit
from relay.results.heads import CANDIDATES, commits_by_prefix
from relay.results.tests import identities_matching

MAX_QUERY = 140
MIN_SHA_PREFIX = 4
PR_NUMBER = re.compile(r"^(?:#|pr\s*#?\s*)?([0-9]{1,9})$", re.IGNORECASE)
SHA_PREFIX = re.compile(rf"^[0-9a-f]{{{MIN_SHA_PREFIX},40}}$", re.IGNORECASE)


@dataclass
class SearchResult:
    query: str
    url: str = ""
    """Where to go when the query names exactly one thing."""
    commits: list = field(default_factory=list)
    backends: list = field(default_factory=list)
    tests: list = field(default_factory=list)
    """Test identities (relay.models.TestIdentity) whose id or name matches."""
    pr_number: int | None = None
    """A PR number the relay has never seen (shown on the not-found page)."""

    @property
    def found(self) -> bool:
        return bool(self.url or self.commits or self.backends or self.tests)


def search(query: str) -> SearchResult:
    """A PR number ("151999", "#151999"), then a SHA prefix, then a backend (full name, display
    name or device, case-insensitive), then a test (its id, or a part of its name). One match is
    a destination; several are a list."""
    query = query.strip()
    result = SearchResult(query)
    pr = PR_NUMBER.match(query)
    if pr and pr_known(int(pr.group(1))):
        result.url = f"/pr/{int(pr.group(1))}"
        return result
    result.pr_number = int(pr.group(1)) if pr else None
    if SHA_PREFIX.match(query):
        result.commits = commits_by_prefix(query)
    if not result.commits:
        result.backends = backends_matching(query)
    if not result.commits and not result.backends:
        result.tests = identities_matching(query)
    return _settle(result)


def _settle(result: SearchResult) -> SearchResult:
    if len(result.commits) == 1:
        result.url = f"/commit/{result.commits[0].sha}"
    elif len(result.backends) == 1:
        result.url = f"/crcr/{result.backends[0].full_name}"
    elif len(result.tests) == 1:
        result.url = "/test/" + quote(result.tests[0].identity, safe="")
    return result


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
