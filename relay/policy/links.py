"""The HUD's addresses and how a commit is named short, each written once: relative paths for the
pages (a link on our own pages), absolute URLs with CRCR_PUBLIC_URL for what leaves the server
(check runs, PR comments, notifications), and one short-SHA length everywhere."""

from urllib.parse import quote, urlencode

from django.conf import settings

SHORT_SHA = 10
"""Characters of a commit SHA shown for it: git's own abbreviation in a repository of pytorch's size."""


def short_sha(sha: str) -> str:
    return (sha or "")[:SHORT_SHA]


def commit_path(sha: str, backend_id: int | None = None) -> str:
    return f"/commit/{sha}" + (f"#backend-{backend_id}" if backend_id is not None else "")


def pr_path(number: int) -> str:
    return f"/pr/{int(number)}"


def backend_path(full_name: str, **query) -> str:
    query = {k: v for k, v in query.items() if v not in (None, "")}
    return f"/crcr/{full_name}" + (f"?{urlencode(query)}" if query else "")


def test_path(identity: str) -> str:
    return "/test/" + quote(identity, safe="") if identity else "#"


def known_issue_path(pk: int) -> str:
    return f"/known-issues/{int(pk)}"


def bisection_api_path(pk: int) -> str:
    return f"/api/v1/bisections/{int(pk)}"


def public_url(path: str) -> str:
    """An address for outside the server (GitHub, email, a webhook): this deployment's own."""
    return f"{settings.CRCR_PUBLIC_URL}{path}"
