"""The set of repositories the App is installed on, kept current from `installation` and
`installation_repositories` events and a periodic full sync, so a repo without the App shows as
"not installed" instead of failing on every event."""

import logging

from django.db import transaction
from django.db.models.functions import Lower

from ..models import Installation, InstalledRepo, RelayState
from . import client as github

logger = logging.getLogger(__name__)

INSTALLATION_EVENTS = ("installation", "installation_repositories")
SYNCED_KEY = "installations-synced"


def installed_names() -> set[str] | None:
    """Lower-cased names of installed repos, or None while we have never learnt the full set
    (then every dispatch is attempted and GitHub's 404 tells)."""
    if not RelayState.objects.filter(key=SYNCED_KEY).exists():
        return None
    return set(
        InstalledRepo.objects.filter(installation__suspended=False)
        .annotate(n=Lower("full_name"))
        .values_list("n", flat=True)
    )


def known_missing_sql(project_alias: str) -> str:
    """The SQL condition "the App is known not to be installed on this project's repo": the rule of
    `installed_names`, for statements that decide it row by row in the database (served by the
    unique Lower(full_name) index)."""
    repo, inst, state = InstalledRepo._meta.db_table, Installation._meta.db_table, RelayState._meta.db_table
    return (
        f"EXISTS (SELECT 1 FROM {state} WHERE \"key\" = '{SYNCED_KEY}')"
        f" AND NOT EXISTS (SELECT 1 FROM {repo} r JOIN {inst} i ON i.id = r.installation_id"
        f" WHERE LOWER(r.full_name) = LOWER({project_alias}.full_name) AND NOT i.suspended)"
    )


def installation_id_sql(project_alias: str) -> str:
    """A scalar subquery: the App installation we know for this project's repo, else NULL (the
    rule of `installation_for`, for a statement that reads it with its row)."""
    repo, inst = InstalledRepo._meta.db_table, Installation._meta.db_table
    return (
        f"(SELECT i.installation_id FROM {repo} r JOIN {inst} i ON i.id = r.installation_id"
        f" WHERE LOWER(r.full_name) = LOWER({project_alias}.full_name))"
    )


def installation_event_apply(event: str, payload: dict) -> None:
    data = payload.get("installation") or {}
    if not data.get("id"):
        return
    action = payload.get("action", "")
    if event == "installation" and action == "deleted":
        Installation.objects.filter(installation_id=data["id"]).delete()
    else:
        inst = _installation_upsert(
            data, suspended=action == "suspend" or (bool(data.get("suspended_at")) and action != "unsuspend")
        )
        _repos_add(inst, payload.get("repositories") or payload.get("repositories_added") or [])
        _repos_remove(payload.get("repositories_removed") or [])
    transaction.on_commit(lambda: github.forget_installation_token(data["id"]))


def _installation_upsert(data: dict, suspended: bool) -> Installation:
    inst, _ = Installation.objects.update_or_create(
        installation_id=data["id"],
        defaults={
            "account_login": (data.get("account") or {}).get("login", "")[:100],
            "repository_selection": str(data.get("repository_selection") or "")[:16],
            "suspended": suspended,
        },
    )
    return inst


def _repos_add(inst: Installation, repos: list[dict]) -> None:
    for repo in repos:
        name = repo.get("full_name") or ""
        if "/" not in name:
            continue
        InstalledRepo.objects.filter(full_name__iexact=name).exclude(installation=inst).delete()
        InstalledRepo.objects.update_or_create(
            full_name__iexact=name, defaults={"full_name": name, "repo_id": repo.get("id"), "installation": inst}
        )


def _repos_remove(repos: list[dict]) -> None:
    for repo in repos:
        InstalledRepo.objects.filter(full_name__iexact=repo.get("full_name") or "").delete()


def installation_remember(full_name: str, installation_id: int) -> None:
    """Learnt from a successful lookup at send time."""
    inst, _ = Installation.objects.get_or_create(installation_id=installation_id)
    _repos_add(inst, [{"full_name": full_name}])


def installation_for(full_name: str) -> int | None:
    repo = InstalledRepo.objects.select_related("installation").filter(full_name__iexact=full_name).first()
    return repo.installation.installation_id if repo else None


def installation_id_for(full_name: str, known: int | None = None) -> int:
    """The App installation that can act on a repository: the one we know (`known`, when the
    caller read it with its row: `installation_id_sql`), else GitHub's answer (remembered). Raises
    github.NotInstalled when the App is not installed there."""
    known = known if known is not None else installation_for(full_name)
    if known is not None:
        return known
    found = github.installation_id_for_repo(full_name)
    installation_remember(full_name, found)
    return found


def installations_sync() -> int:
    """Replace the installed set with what GitHub lists now. Returns the number of repos."""
    listed = [(inst, github.installation_repositories(inst["id"])) for inst in github.list_installations()]
    with transaction.atomic():
        Installation.objects.exclude(installation_id__in=[inst["id"] for inst, _ in listed]).delete()
        for data, repos in listed:
            inst = _installation_upsert(data, suspended=bool(data.get("suspended_at")))
            InstalledRepo.objects.filter(installation=inst).delete()
            _repos_add(inst, repos)
        RelayState.objects.update_or_create(
            key=SYNCED_KEY, defaults={"value": {"repos": sum(len(r) for _, r in listed)}}
        )
    return sum(len(r) for _, r in listed)
