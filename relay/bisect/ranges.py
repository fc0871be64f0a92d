"""The commits a bisection searches: the first-parent chain from the failing commit back to the
last pass, read from GitHub's compare API (`GET /repos/{o}/{r}/compare/{base}...{head}`), whose
`commits` list everything reachable from head and not from base, oldest first, with each one's
parents. A merge's side branch is in that list but not on the branch's own history: following
first parents from head keeps only the commits that landed on the branch one by one."""

from django.conf import settings

from relay.policy.links import short_sha

from ..github import client as github
from ..github.upstream import upstream_installation_id

PER_PAGE = 100
"""A page of a comparison's commits, as GitHub pages one when asked to (per_page, page)."""
MAX_PAGES = 10
"""A thousand commits: a range past that is no bisection (a backend silent for a week)."""


class RangeUnavailable(Exception):
    """GitHub could not compare the two commits (unknown, unrelated, or unreachable)."""


def first_parent_range(good: str, bad: str) -> list[str]:
    """The first-parent commits after `good` up to `bad`, oldest first (`good` not among them)."""
    commits = _compared(good, bad)
    parents = {c["sha"]: [p["sha"] for p in c.get("parents") or []] for c in commits if isinstance(c, dict)}
    chain, sha = [], bad
    while sha in parents and sha != good:
        chain.append(sha)
        sha = parents[sha][0] if parents[sha] else None
    if sha != good:
        raise RangeUnavailable(f"{short_sha(bad)} does not descend from {short_sha(good)} along first parents")
    return chain[::-1]


def _compared(good: str, bad: str) -> list[dict]:
    path = f"/repos/{settings.CRCR_UPSTREAM_REPO}/compare/{good}...{bad}?per_page={PER_PAGE}"
    try:
        response = github.paginate_as_installation(upstream_installation_id(), path, key="commits", max_pages=MAX_PAGES)
    except github.GitHubError as exc:
        raise RangeUnavailable(f"compare {short_sha(good)}...{short_sha(bad)}: {exc}") from exc
    return response.json
