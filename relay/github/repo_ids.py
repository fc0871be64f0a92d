"""Pinning a GitHub-provider project to its repository id, on its first verified callback.

A project registered by name (an allowlist import, the API without an id) has no id yet. The id
is then learnt from GitHub — the App's installation repository list, which a sync or an
installation event may already have stored — never from the caller's token, and written once
(a conditional UPDATE); from then on a token must carry exactly that `repository_id`, so a
renamed or recreated repository cannot report as the registered one."""

from django.db import IntegrityError

from ..models import InstalledRepo, Project
from . import client as github
from . import installations


class RepoUnknown(Exception):
    """GitHub does not show the App installed on this repository: nothing to pin to."""


class GitHubUnreachable(Exception):
    """GitHub could not answer now (503)."""


def github_repo_id(full_name: str) -> int:
    known = InstalledRepo.objects.filter(full_name__iexact=full_name, repo_id__isnull=False).first()
    if known is not None:
        return known.repo_id
    try:
        installation_id = installations.installation_for(full_name) or github.installation_id_for_repo(full_name)
        repos = github.installation_repositories(installation_id)
    except github.PermanentGitHubError as exc:
        raise RepoUnknown(f"GitHub does not show the App installed on {full_name} ({exc.status})") from exc
    except github.TransientGitHubError as exc:
        raise GitHubUnreachable(f"GitHub could not tell the repository id of {full_name}; retry later") from exc
    match = next(
        (r for r in repos if str(r.get("full_name", "")).lower() == full_name.lower() and isinstance(r.get("id"), int)),
        None,
    )
    if match is None:
        raise RepoUnknown(f"{full_name} is not among the repositories the App is installed on")
    return match["id"]


def project_repo_id_pin(project: Project) -> int:
    """The project's pinned id, learning it from GitHub first if it has none."""
    if project.github_repo_id is not None:
        return project.github_repo_id
    repo_id = github_repo_id(project.full_name)
    try:
        Project.objects.filter(pk=project.pk, github_repo_id__isnull=True).update(github_repo_id=repo_id)
    except IntegrityError as exc:
        raise RepoUnknown(
            f"repository id {repo_id} of {project.full_name} is already registered to another project"
        ) from exc
    project.refresh_from_db(fields=["github_repo_id"])
    return project.github_repo_id
