"""Recording the upstream commits a delivery tells us about: pushed commits (trunk when pushed to
the default branch, with first parents from the push's order) and PR heads."""

from datetime import timedelta

from relay.inputs.params import aware_datetime

from ..models import PullRequest, UpstreamCommit

MAX_PUSH_COMMITS = 200
"""A push may carry 2,048 commits; rows for the newest few hundred are plenty for the HUD."""


def commits_record(event: str, payload: dict, received_at) -> None:
    if event == "push" and str(payload.get("ref") or "").startswith("refs/heads/"):
        _push_commits(payload, received_at)
    elif event == "pull_request":
        _pr_head(payload, received_at)


def _title(message: str) -> str:
    return (message or "").strip().splitlines()[0][:300] if (message or "").strip() else ""


def _when(value):
    """GitHub's commit timestamp; one no database can hold (or none) is left out, not a 500."""
    return aware_datetime(value)


def _push_commits(payload: dict, received_at) -> None:
    branch = (payload.get("ref") or "").removeprefix("refs/heads/")
    trunk = branch == ((payload.get("repository") or {}).get("default_branch") or "main")
    commits = [c for c in payload.get("commits") or [] if isinstance(c, dict) and c.get("id")]
    if not commits and isinstance(payload.get("head_commit"), dict):
        commits = [payload["head_commit"]]
    parent = payload.get("before") or ""
    rows = []
    for index, commit in enumerate(commits):
        rows.append(_push_row(commit, branch, trunk, parent, received_at + timedelta(microseconds=index)))
        parent = commit["id"]
    unique = list({row.sha: row for row in rows}.values())  # a payload may repeat a commit id
    _upsert(
        unique[-MAX_PUSH_COMMITS:], ["title", "author", "committed_at", "landed_at", "branch", "is_trunk", "parent_sha"]
    )


def _push_row(commit: dict, branch: str, trunk: bool, parent: str, landed_at) -> UpstreamCommit:
    author = commit.get("author") or {}
    return UpstreamCommit(
        sha=commit["id"][:40],
        title=_title(commit.get("message")),
        author=(author.get("username") or author.get("name") or "")[:100],
        committed_at=_when(commit.get("timestamp")),
        landed_at=landed_at,
        branch=branch[:255],
        is_trunk=trunk,
        parent_sha="" if set(parent) == {"0"} else parent[:40],
    )


def _pr_record(pr: dict, received_at) -> None:
    """Upsert the PR's author, labels and base as the newest webhook says (an older one processed
    late changes nothing); fields of the wrong type are left empty."""
    base, head = _mapping(pr.get("base")), _mapping(pr.get("head"))
    labels = [
        str(label.get("name"))[:100]
        for label in _list(pr.get("labels"))
        if isinstance(label, dict) and label.get("name")
    ]
    state = "merged" if pr.get("merged") is True else str(pr.get("state") or "")[:16]
    facts = {
        "title": _text(pr.get("title"), 300),
        "author": _text(_mapping(pr.get("user")).get("login"), 100),
        "labels": labels,
        "base_sha": _text(base.get("sha"), 40),
        "base_ref": _text(base.get("ref"), 255),
        "head_sha": _text(head.get("sha"), 40),
        "state": state,
        "updated_at": received_at,
    }
    row, created = PullRequest.objects.get_or_create(number=pr["number"], defaults=facts)
    if not created:
        PullRequest.objects.filter(pk=row.pk, updated_at__lte=received_at).update(**facts)


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _text(value, limit: int) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _pr_head(payload: dict, received_at) -> None:
    pr = payload.get("pull_request") or {}
    if isinstance(pr, dict) and isinstance(pr.get("number"), int):
        _pr_record(pr, received_at)
    sha = (pr.get("head") or {}).get("sha")
    if not sha or not isinstance(pr.get("number"), int):
        return
    row = UpstreamCommit(
        sha=sha[:40],
        title=str(pr.get("title") or "")[:300],
        author=str((pr.get("user") or {}).get("login") or "")[:100],
        committed_at=_when(pr.get("updated_at")),
        landed_at=received_at,
        branch=str((pr.get("head") or {}).get("ref") or "")[:255],
        pr_number=pr["number"],
    )
    existing = UpstreamCommit.objects.filter(sha=row.sha).first()
    if existing is None:
        UpstreamCommit.objects.bulk_create([row], ignore_conflicts=True)
    elif existing.pr_number is None and not existing.is_trunk:
        UpstreamCommit.objects.filter(pk=existing.pk).update(
            pr_number=row.pr_number, title=row.title, author=row.author
        )


def _upsert(rows: list[UpstreamCommit], fields: list[str]) -> None:
    if rows:
        UpstreamCommit.objects.bulk_create(rows, update_conflicts=True, unique_fields=["sha"], update_fields=fields)
