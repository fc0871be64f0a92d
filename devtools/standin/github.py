"""GitHub REST routes other than checks: the App, installations, dispatches, commits, pulls,
workflow re-runs, issue comments and the rate limit."""

import json
import time

from werkzeug.wrappers import Response

from .access import readable, target
from .auth import app_jwt, installation_grant
from .http import Call, HTTPError, Routes, empty_response, iso, json_response, paginate

route = Routes()

EVENT_TYPE_MAX = 100
PAYLOAD_MAX_KEYS = 10
PAYLOAD_MAX_BYTES = 65536
"""repository_dispatch limits from GitHub's OpenAPI description."""
LEVELS = {"read": 1, "write": 2, "admin": 3}
COMMENT_MAX = 65536


def _invalid(detail: str) -> HTTPError:
    return HTTPError(422, f"Invalid request.\n\n{detail}")


# --- the App (JWT) --------------------------------------------------------------------------------


@route("/app", "GET")
def app_get(call: Call):
    app_jwt(call)
    return json_response(call.standin.world.app_json())


@route("/app/installations", "GET")
def installations_list(call: Call):
    app_jwt(call)
    world = call.standin.world
    items = [world.installation_json(i) for _, i in sorted(world.installations.items())]
    page, headers = paginate(call, items)
    return json_response(page, headers=headers)


@route("/app/installations/<int:installation_id>", "GET")
def installation_get(call: Call, installation_id: int):
    app_jwt(call)
    world = call.standin.world
    return json_response(world.installation_json(world.installation(installation_id)))


@route("/repos/<owner>/<name>/installation", "GET")
def repo_installation(call: Call, owner: str, name: str):
    app_jwt(call)
    world = call.standin.world
    repo = world.repo(owner, name)
    if repo["installation_id"] is None:
        raise HTTPError(404, "Not Found")
    return json_response(world.installation_json(world.installation(repo["installation_id"])))


@route("/app/installations/<int:installation_id>/access_tokens", "POST")
def access_token_create(call: Call, installation_id: int):
    app_jwt(call)
    world = call.standin.world
    inst = world.installation(installation_id)
    body = call.json_object()
    repo_ids = _scoped_repo_ids(world, inst, body)
    grant = world.mint_token(inst["id"], _narrowed_permissions(inst, body.get("permissions")), repo_ids)
    selection = "selected" if repo_ids is not None else inst["repository_selection"]
    data = {
        "token": grant["token"],
        "expires_at": iso(grant["expires_at"]),
        "permissions": grant["permissions"],
        "repository_selection": selection,
    }
    if repo_ids is not None:
        data["repositories"] = [world.repo_json(r) for r in world.installation_repos(inst["id"], repo_ids)]
    return json_response(data, 201)


def _narrowed_permissions(inst: dict, requested) -> dict:
    """A token may ask for less than the installation has, never more."""
    if requested is None:
        return dict(inst["permissions"])
    granted = inst["permissions"]
    if not isinstance(requested, dict) or any(
        LEVELS.get(level, 99) > LEVELS.get(granted.get(perm), 0) for perm, level in requested.items()
    ):
        raise HTTPError(422, "The permissions requested are not granted to this installation.")
    return {"metadata": "read", **requested}


def _scoped_repo_ids(world, inst: dict, body: dict) -> set | None:
    names, ids = body.get("repositories"), body.get("repository_ids")
    if names is None and ids is None:
        return None
    available = world.installation_repos(inst["id"])
    by_name = {r["full_name"].split("/")[1].lower(): r["id"] for r in available}
    wanted_names = [str(n).lower() for n in names or []]
    wanted_ids = set(ids or [])
    if any(n not in by_name for n in wanted_names) or not wanted_ids <= {r["id"] for r in available}:
        message = (
            "There is at least one repository that does not exist or is not accessible to the parent installation."
        )
        raise HTTPError(422, message)
    return {by_name[n] for n in wanted_names} | wanted_ids


@route("/installation/repositories", "GET")
def installation_repositories(call: Call):
    world = call.standin.world
    grant = installation_grant(call)
    repos = [world.repo_json(r) for r in world.installation_repos(grant["installation_id"], grant["repo_ids"])]
    page, headers = paginate(call, repos)
    inst = world.installation(grant["installation_id"])
    selection = "selected" if grant["repo_ids"] is not None else inst["repository_selection"]
    data = {"total_count": len(repos), "repository_selection": selection, "repositories": page}
    return json_response(data, headers=headers)


# --- repository_dispatch ----------------------------------------------------------------------------


def validate_dispatch(body: dict) -> None:
    event_type = body.get("event_type")
    if event_type is None:
        raise _invalid('"event_type" wasn\'t supplied.')
    if not isinstance(event_type, str):
        raise _invalid(f"For 'properties/event_type', {json.dumps(event_type)} is not a string.")
    if not 1 <= len(event_type) <= EVENT_TYPE_MAX:
        raise _invalid(
            f"For 'properties/event_type', {json.dumps(event_type)} must be 1 to {EVENT_TYPE_MAX} characters long."
        )
    _validate_client_payload(body.get("client_payload", {}))


def _validate_client_payload(payload) -> None:
    if not isinstance(payload, dict):
        raise _invalid(f"For 'properties/client_payload', {json.dumps(payload)} is not an object.")
    if len(payload) > PAYLOAD_MAX_KEYS:
        raise _invalid(f"No more than {PAYLOAD_MAX_KEYS} properties are allowed; {len(payload)} were supplied.")
    size = len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())
    if size > PAYLOAD_MAX_BYTES:
        raise _invalid(f"client_payload is {size} bytes; it must be at most {PAYLOAD_MAX_BYTES} bytes.")


@route("/repos/<owner>/<name>/dispatches", "POST")
def dispatch_create(call: Call, owner: str, name: str):
    repo = target(call, owner, name, "contents", hidden_status=404)
    body = call.json_object()
    validate_dispatch(body)
    record = {
        "repo": repo["full_name"],
        "event_type": body["event_type"],
        "client_payload": body.get("client_payload", {}),
        "at": time.time(),
    }
    call.standin.world.dispatches.append(record)
    call.standin.fire_dispatch(record)
    return empty_response(204)


# --- commits and pulls ------------------------------------------------------------------------------


@route("/repos/<owner>/<name>/commits/<path:ref>", "GET")
def commit_get(call: Call, owner: str, name: str, ref: str):
    world = call.standin.world
    repo = readable(call, owner, name)
    sha = world.resolve_sha(repo, ref)
    if sha is None:
        raise HTTPError(422, f"No commit found for SHA: {ref}")
    if "application/vnd.github.sha" in call.request.headers.get("Accept", ""):
        return Response(sha, content_type="text/plain; charset=utf-8")
    return json_response(world.commit_json(repo, world.commits[repo["full_name"].lower()][sha]))


@route("/repos/<owner>/<name>/compare/<path:basehead>", "GET")
def compare_get(call: Call, owner: str, name: str, basehead: str):
    """GitHub's comparison of two commits (`BASE...HEAD`): the commits reachable from head and not
    from base, oldest first (parents before children), paged by per_page/page with a link
    header, with status, ahead_by, behind_by, total_commits and the merge base."""
    world = call.standin.world
    repo = readable(call, owner, name)
    base_ref, dots, head_ref = basehead.partition("...")
    if not dots:
        raise HTTPError(404, "Not Found")
    base, head = world.resolve_sha(repo, base_ref), world.resolve_sha(repo, head_ref)
    if base is None or head is None:
        raise HTTPError(404, f"No common ancestor between {base_ref} and {head_ref}.")
    commits = world.commits[repo["full_name"].lower()]
    mine, theirs = _ancestors(commits, head), _ancestors(commits, base)
    ahead = [sha for sha in _parents_first(commits, head) if sha not in theirs]
    behind = theirs - mine
    page, headers = paginate(call, ahead, default_per_page=250)
    body = {
        "url": f"{world.base_url}/repos/{repo['full_name']}/compare/{basehead}",
        "html_url": f"https://github.com/{repo['full_name']}/compare/{basehead}",
        "base_commit": world.commit_json(repo, commits[base]),
        "merge_base_commit": world.commit_json(repo, commits[_merge_base(commits, base, mine)]),
        "status": _compare_status(ahead, behind),
        "ahead_by": len(ahead),
        "behind_by": len(behind),
        "total_commits": len(ahead),
        "commits": [world.commit_json(repo, commits[sha]) for sha in page],
        "files": [],
    }
    return json_response(body, headers=headers)


def _ancestors(commits: dict, sha: str) -> set[str]:
    seen, todo = set(), [sha]
    while todo:
        current = todo.pop()
        if current not in seen and current in commits:
            seen.add(current)
            todo.extend(commits[current]["parents"])
    return seen


def _parents_first(commits: dict, head: str) -> list[str]:
    """Every ancestor of head, each after its parents (an iterative post-order walk)."""
    order, seen, todo = [], set(), [(head, False)]
    while todo:
        sha, done = todo.pop()
        if done:
            order.append(sha)
        elif sha not in seen and sha in commits:
            seen.add(sha)
            todo.append((sha, True))
            todo.extend((parent, False) for parent in reversed(commits[sha]["parents"]))
    return order


def _merge_base(commits: dict, base: str, mine: set[str]) -> str:
    """The first commit reachable from base (first parents first) that head also reaches."""
    for sha in reversed(_parents_first(commits, base)):
        if sha in mine:
            return sha
    return base


def _compare_status(ahead: list, behind: set) -> str:
    if ahead and behind:
        return "diverged"
    return "ahead" if ahead else "behind" if behind else "identical"


@route("/repos/<owner>/<name>/pulls/<int:number>", "GET")
def pull_get(call: Call, owner: str, name: str, number: int):
    world = call.standin.world
    repo = readable(call, owner, name)
    pull = world.pulls.get((repo["full_name"].lower(), number))
    if pull is None:
        raise HTTPError(404, "Not Found")
    return json_response(world.pull_json(repo, pull))


# --- workflow re-runs on downstream repos -----------------------------------------------------------


def _rerun(call: Call, owner: str, name: str, run_id: int, kind: str):
    world = call.standin.world
    repo = target(call, owner, name, "actions")
    if (repo["full_name"].lower(), run_id) in world.running:
        raise HTTPError(403, "This workflow is already running")
    world.reruns.append({"repo": repo["full_name"], "run_id": run_id, "kind": kind, "at": time.time()})
    return json_response({}, 201)


@route("/repos/<owner>/<name>/actions/runs/<int:run_id>/rerun", "POST")
def run_rerun(call: Call, owner: str, name: str, run_id: int):
    return _rerun(call, owner, name, run_id, "all")


@route("/repos/<owner>/<name>/actions/runs/<int:run_id>/rerun-failed-jobs", "POST")
def run_rerun_failed(call: Call, owner: str, name: str, run_id: int):
    return _rerun(call, owner, name, run_id, "failed")


# --- issue comments ---------------------------------------------------------------------------------


def _comment_text(call: Call) -> str:
    text = call.json_object().get("body")
    if not isinstance(text, str) or not text:
        raise _invalid('"body" wasn\'t supplied.')
    if len(text) > COMMENT_MAX:
        raise HTTPError(422, f"Validation Failed: body is too long (maximum is {COMMENT_MAX} characters)")
    return text


def comment_json(world, comment: dict) -> dict:
    full, number = comment["repo"], comment["id"]
    issue_url = f"{world.base_url}/repos/{full}/issues/{comment['issue_number']}"
    return {
        "id": number,
        "node_id": f"IC_kwDO{number:x}",
        "url": f"{world.base_url}/repos/{full}/issues/comments/{number}",
        "html_url": comment["html_url"],
        "issue_url": issue_url,
        "body": comment["body"],
        "user": dict(comment["user"]),
        "created_at": comment["created_at"],
        "updated_at": comment["updated_at"],
        "author_association": "NONE",
    }


@route("/repos/<owner>/<name>/issues/<int:number>/comments", "POST")
def comment_create(call: Call, owner: str, name: str, number: int):
    world = call.standin.world
    repo = target(call, owner, name, "issues", alternative="pull_requests")
    text, now, comment_id = _comment_text(call), iso(), next(world.comment_ids)
    kind = "pull" if (repo["full_name"].lower(), number) in world.pulls else "issues"
    world.comments[comment_id] = {
        "id": comment_id,
        "repo": repo["full_name"],
        "issue_number": number,
        "body": text,
        "created_at": now,
        "updated_at": now,
        "user": world.bot_user(),
        "html_url": f"https://github.com/{repo['full_name']}/{kind}/{number}#issuecomment-{comment_id}",
    }
    return json_response(comment_json(world, world.comments[comment_id]), 201)


def _stored_comment(world, repo: dict, comment_id: int) -> dict:
    comment = world.comments.get(comment_id)
    if comment is None or comment["repo"].lower() != repo["full_name"].lower():
        raise HTTPError(404, "Not Found")
    return comment


@route("/repos/<owner>/<name>/issues/comments/<int:comment_id>", "PATCH")
def comment_update(call: Call, owner: str, name: str, comment_id: int):
    world = call.standin.world
    repo = target(call, owner, name, "issues", alternative="pull_requests")
    comment = _stored_comment(world, repo, comment_id)
    comment["body"], comment["updated_at"] = _comment_text(call), iso()
    return json_response(comment_json(world, comment))


@route("/repos/<owner>/<name>/issues/comments/<int:comment_id>", "GET")
def comment_get(call: Call, owner: str, name: str, comment_id: int):
    world = call.standin.world
    repo = readable(call, owner, name)
    return json_response(comment_json(world, _stored_comment(world, repo, comment_id)))


@route("/repos/<owner>/<name>/issues/<int:number>/comments", "GET")
def comments_list(call: Call, owner: str, name: str, number: int):
    world = call.standin.world
    repo = readable(call, owner, name)
    key = repo["full_name"].lower()
    found = [c for _, c in sorted(world.comments.items()) if c["repo"].lower() == key and c["issue_number"] == number]
    page, headers = paginate(call, [comment_json(world, c) for c in found])
    return json_response(page, headers=headers)


# --- rate limit -------------------------------------------------------------------------------------


@route("/rate_limit", "GET")
def rate_limit_get(call: Call):
    installation_grant(call, required=False)
    core = call.standin.world.rate_limit(count=False)
    data = {"resources": {"core": core}}
    if call.request.headers.get("X-GitHub-Api-Version") != "2026-03-10":
        data["rate"] = core  # removed in the 2026-03-10 API version
    return json_response(data)
