"""GitHub's issues API, as much as the relay uses: open an issue in a repository, read it, change
its title, body and state (close with a reason, reopen), list a repository's issues. Shapes as
GitHub answers (REST API 2022-11-28): numbers shared with the repository's pull requests, `state`
open or closed with `state_reason`, `closed_at`, the App's bot as the author."""

from .access import readable, target
from .http import Call, HTTPError, Routes, iso, json_response, paginate

route = Routes()
TITLE_MAX = 256
BODY_MAX = 65536
STATE_REASONS = {"closed": {"completed", "not_planned", "duplicate"}, "open": {"reopened"}}


def _invalid(message: str, field: str, code: str = "invalid") -> HTTPError:
    error = {"resource": "Issue", "field": field, "code": code, "message": message}
    return HTTPError(422, "Validation Failed", errors=[error])


def issue_json(world, issue: dict) -> dict:
    full, number = issue["repo"], issue["number"]
    url = f"{world.base_url}/repos/{full}/issues/{number}"
    return {
        "id": issue["id"],
        "node_id": f"I_kwDO{issue['id']:x}",
        "url": url,
        "repository_url": f"{world.base_url}/repos/{full}",
        "comments_url": f"{url}/comments",
        "html_url": f"https://github.com/{full}/issues/{number}",
        "number": number,
        "state": issue["state"],
        "state_reason": issue["state_reason"],
        "title": issue["title"],
        "body": issue["body"],
        "user": dict(issue["user"]),
        "labels": [{"name": name, "color": "ededed", "default": False} for name in issue["labels"]],
        "assignee": None,
        "assignees": [],
        "locked": False,
        "comments": 0,
        "created_at": issue["created_at"],
        "updated_at": issue["updated_at"],
        "closed_at": issue["closed_at"],
        "author_association": "NONE",
    }


def _text(body: dict, key: str, limit: int, required: bool = False) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise _invalid(f"{key} is missing", key, "missing_field")
    if len(value) > limit:
        raise _invalid(f"{key} is too long (maximum is {limit} characters)", key)
    return value


def _next_number(world, repo_key: str) -> int:
    taken = [n for (r, n) in world.pulls if r == repo_key] + [n for (r, n) in world.issues if r == repo_key]
    return max(taken, default=0) + 1


@route("/repos/<owner>/<name>/issues", "POST")
def issue_create(call: Call, owner: str, name: str):
    world = call.standin.world
    repo = target(call, owner, name, "issues")
    body = call.json_object()
    title, text = _text(body, "title", TITLE_MAX, required=True), _text(body, "body", BODY_MAX) or ""
    labels = body.get("labels") or []
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        raise _invalid("labels must be a list of strings", "labels")
    key, now = repo["full_name"].lower(), iso()
    number = _next_number(world, key)
    world.issues[(key, number)] = {
        "id": next(world.comment_ids),
        "repo": repo["full_name"],
        "number": number,
        "title": title,
        "body": text,
        "labels": labels,
        "state": "open",
        "state_reason": None,
        "created_at": now,
        "updated_at": now,
        "closed_at": None,
        "user": world.bot_user(),
        "history": [("opened", now)],
    }
    return json_response(issue_json(world, world.issues[(key, number)]), 201)


def _stored(world, repo: dict, number: int) -> dict:
    issue = world.issues.get((repo["full_name"].lower(), number))
    if issue is None:
        raise HTTPError(404, "Not Found")
    return issue


@route("/repos/<owner>/<name>/issues/<int:number>", "GET")
def issue_get(call: Call, owner: str, name: str, number: int):
    world = call.standin.world
    return json_response(issue_json(world, _stored(world, readable(call, owner, name), number)))


@route("/repos/<owner>/<name>/issues/<int:number>", "PATCH")
def issue_update(call: Call, owner: str, name: str, number: int):
    world = call.standin.world
    repo = target(call, owner, name, "issues")
    issue, body, now = _stored(world, repo, number), call.json_object(), iso()
    title, text = _text(body, "title", TITLE_MAX), _text(body, "body", BODY_MAX)
    state = body.get("state")
    if state is not None and state not in STATE_REASONS:
        raise _invalid("state is not included in the list", "state")
    reason = body.get("state_reason")
    if reason is not None and reason not in STATE_REASONS.get(state or issue["state"], set()):
        raise _invalid("state_reason is not included in the list", "state_reason")
    issue["title"] = issue["title"] if title is None else title
    issue["body"] = issue["body"] if text is None else text
    if state is not None and state != issue["state"]:
        issue["state"] = state
        issue["state_reason"] = reason or ("completed" if state == "closed" else "reopened")
        issue["closed_at"] = now if state == "closed" else None
        issue["history"].append((state, now))
    issue["updated_at"] = now
    return json_response(issue_json(world, issue))


@route("/repos/<owner>/<name>/issues", "GET")
def issues_list(call: Call, owner: str, name: str):
    world = call.standin.world
    repo = readable(call, owner, name)
    key, wanted = repo["full_name"].lower(), call.request.args.get("state", "open")
    found = [
        issue
        for (r, _), issue in sorted(world.issues.items(), key=lambda item: -item[0][1])
        if r == key and wanted in ("all", issue["state"])
    ]
    page, headers = paginate(call, [issue_json(world, issue) for issue in found])
    return json_response(page, headers=headers)
