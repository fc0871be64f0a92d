"""Who is calling back: the verified token mapped to one registered project, by the immutable
identifiers each CI provider offers (GitHub repository id, Buildkite organization and pipeline
UUIDs, GitLab project id), never by a mutable name alone. The token's issuer must be the
project's own CI provider, and a GitHub project's repository id is pinned on its first verified
callback (relay.github.repo_ids) and compared on every one."""

import threading
import time
from functools import cache

from django.conf import settings
from django.db import connection

from ..github.repo_ids import RepoUnknown, project_repo_id_pin
from ..models import CIProvider, Project
from .job_rows import row_read
from .oidc import TokenRejected, VerifiedToken


class IdentityForbidden(Exception):
    """403: a valid token whose identity is not allowed here."""


_found: dict[tuple[str, str], tuple[float, Project | None]] = {}
_found_lock = threading.Lock()
MAX_CACHED = 10_000


def project_lookup(kind: str, key: str, query) -> Project | None:
    """The project registered under a provider's identity (`query` finds it), remembered for
    CRCR_REGISTRY_CACHE_SECONDS: every callback asks, the registry rarely changes, and a change
    (a deactivation, a level) reaches callbacks within that time. A GitHub project not pinned to
    a repository id yet is never remembered, so its pin is always read from the database. The
    instance is shared: callers only read it."""
    now = time.monotonic()
    hit = _found.get((kind, key))
    if hit is not None and hit[0] > now:
        return hit[1]
    project = query()
    ttl = settings.CRCR_REGISTRY_CACHE_SECONDS
    if ttl > 0 and (project is None or project.github_repo_id is not None or project.ci_provider != CIProvider.GITHUB):
        with _found_lock:
            if len(_found) >= MAX_CACHED:
                _found.clear()
            _found[(kind, key)] = (now + ttl, project)
    return project


def project_where(column: str, value: str, *, any_case: bool = False) -> Project | None:
    """The registered project whose `column` is `value` (`any_case`: in any letter case, the way
    the registry's unique constraint folds a repository's name, so its index answers), the first
    in the registry's order (Project.Meta.ordering, as `.first()` takes it) when several are;
    every field read.

    One statement prepared once per column: the same read through the ORM (`filter(…).first()`)
    builds and compiles its query and converts its row on every call, 3.4 M instructions, nearly
    half of a callback whose project is not remembered (docs/performance.md, "seventh round")."""
    names = _project_columns()
    project, _ = row_read(Project, names, _project_sql(column, any_case, connection.vendor), [value])
    return project


@cache
def _project_columns() -> tuple[str, ...]:
    return tuple(field.attname for field in Project._meta.concrete_fields)


@cache
def _project_sql(column: str, any_case: bool, vendor: str) -> str:
    quote = connection.ops.quote_name
    fields = {field.attname: field for field in Project._meta.concrete_fields}
    selected = ", ".join(quote(fields[name].column) for name in _project_columns())
    target = quote(fields[column].column)
    where = f"LOWER({target}) = LOWER(%s)" if any_case else f"{target} = %s"
    order = ", ".join(
        f"{quote(fields[name.lstrip('-')].column)}{' DESC' if name.startswith('-') else ''}"
        for name in Project._meta.ordering
    )
    return f"SELECT {selected} FROM {quote(Project._meta.db_table)} WHERE {where} ORDER BY {order} LIMIT 1"


def project_lookups_forget() -> None:
    """Registry changes in this process (and tests, between cases) are seen at once."""
    with _found_lock:
        _found.clear()


def project_for_token(token: VerifiedToken) -> Project | None:
    """The project the token speaks for, or None when it is not registered (callers answer
    "ignored"). Raises IdentityForbidden when the claims contradict the registration."""
    kind = token.issuer.kind
    if kind == CIProvider.GITHUB:
        project = _github_project(token.claims)
    elif kind == CIProvider.BUILDKITE:
        project = _buildkite_project(token.claims)
    elif kind == CIProvider.GITLAB:
        project = _gitlab_project(token.claims)
    else:
        raise TokenRejected(f"issuer kind {kind!r} is not supported")
    if project is not None:
        provider_check(project, kind)
        required_claims_check(project, token.claims)
    return project


def provider_check(project: Project, kind: str) -> None:
    """The token's issuer must be the project's CI provider, or one whose identity the registry
    configured for it explicitly (a Buildkite pipeline, a GitLab project): a GitHub Actions token,
    matched by repository name alone, never speaks for a project that reports from elsewhere."""
    configured = {
        CIProvider.BUILDKITE: bool(project.buildkite_pipeline),
        CIProvider.GITLAB: bool(project.gitlab_project_id),
    }
    if project.ci_provider != kind and not configured.get(kind, False):
        raise IdentityForbidden(
            f"{project.full_name} reports through {CIProvider(project.ci_provider).label}; a {CIProvider(kind).label} token cannot speak for it"
        )


def _claim(claims: dict, name: str) -> str:
    value = claims.get(name)
    if value in (None, ""):
        raise TokenRejected(f"token is missing the {name!r} claim")
    return str(value)


def _github_project(claims: dict) -> Project | None:
    repo = _claim(claims, "repository")
    project = project_lookup(CIProvider.GITHUB, repo.lower(), lambda: project_where("full_name", repo, any_case=True))
    if project is None or project.ci_provider != CIProvider.GITHUB:
        return project  # unregistered (ignored), or refused by provider_check
    try:
        pinned = project_repo_id_pin(project)
    except RepoUnknown as exc:
        raise IdentityForbidden(f"cannot pin {project.full_name} to a repository id: {exc}") from exc
    if str(claims.get("repository_id", "")) != str(pinned):
        raise IdentityForbidden(
            f"token repository_id {claims.get('repository_id')!r} is not the registered id of {project.full_name}; "
            "the repository was renamed or recreated"
        )
    return project


def _buildkite_project(claims: dict) -> Project | None:
    key = f"{_claim(claims, 'organization_id')}/{_claim(claims, 'pipeline_id')}"
    project = project_lookup(
        CIProvider.BUILDKITE, key.lower(), lambda: project_where("buildkite_pipeline", key, any_case=True)
    )
    if project is None:
        raise IdentityForbidden(f"Buildkite pipeline {key} is not registered with CRCR")
    return project


def _gitlab_project(claims: dict) -> Project | None:
    project_id = _claim(claims, "project_id")
    project = project_lookup(CIProvider.GITLAB, project_id, lambda: project_where("gitlab_project_id", project_id))
    if project is None:
        raise IdentityForbidden(f"GitLab project {project_id} is not registered with CRCR")
    path = str(claims.get("project_path", ""))
    if project.gitlab_project_path and path.lower() != project.gitlab_project_path.lower():
        raise IdentityForbidden(
            f"GitLab project {project_id} reports path {path!r}, registered as {project.gitlab_project_path!r}"
        )
    return project


def required_claims_check(project: Project, claims: dict) -> None:
    for name, allowed in (project.oidc_required_claims or {}).items():
        allowed = [str(v) for v in (allowed if isinstance(allowed, list) else [allowed])]
        value = "" if claims.get(name) is None else str(claims.get(name))
        if value not in allowed:
            raise IdentityForbidden(f"claim {name!r} value {value!r} is not allowed for {project.full_name}")
