"""Questions the relay asks about the upstream repository, through the App's installation."""

import logging

from django.conf import settings

from relay.ops.cache import soft_get, soft_set

from . import client as github
from .installations import installation_id_for

logger = logging.getLogger(__name__)
POSITIVE_TTL_SECONDS = 3600
NEGATIVE_TTL_SECONDS = 300


class UpstreamUnavailable(Exception):
    """503: GitHub could not answer and the question must not be guessed."""


def upstream_installation_id() -> int:
    return installation_id_for(settings.CRCR_UPSTREAM_REPO)


def commit_exists(sha: str, *, fail_closed: bool) -> bool:
    """Whether `sha` is a commit of the upstream repo (cached: an hour if yes, five minutes if
    no). When GitHub cannot answer: UpstreamUnavailable if fail_closed, else assume yes."""
    key = f"upstream-commit:{settings.CRCR_UPSTREAM_REPO.lower()}:{sha}"
    cached = soft_get(key)
    if cached is not None:
        return cached
    try:
        found = _commit_lookup(sha)
    except github.TransientGitHubError as exc:
        logger.warning("could not check upstream commit %s: %s", sha, exc)
        if fail_closed:
            raise UpstreamUnavailable(
                f"GitHub is unavailable, cannot verify {sha} exists upstream; retry later"
            ) from exc
        return True
    soft_set(key, found, POSITIVE_TTL_SECONDS if found else NEGATIVE_TTL_SECONDS)
    return found


def _commit_lookup(sha: str) -> bool:
    try:
        response = github.as_installation(
            upstream_installation_id(), "GET", f"/repos/{settings.CRCR_UPSTREAM_REPO}/commits/{sha}"
        )
    except github.PermanentGitHubError as exc:
        if exc.status in (404, 422):
            return False
        raise github.TransientGitHubError(str(exc), exc.status) from exc
    return isinstance(response.json, dict) and response.json.get("sha", "").lower() == sha
