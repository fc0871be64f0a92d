"""Branches, files and pull requests a client opens: the Git refs API (`git/ref`, `git/refs`), the
contents API (base64 files, a blob sha required to replace one, 409 when it is stale), and
creating, listing, editing and labelling pull requests, with GitHub's shapes, status codes and
messages. Enough Git underneath for that: commits with a tree of path → blob sha, blob shas as
Git computes them, refs per repo, fast-forward checks."""

import base64
import binascii
import hashlib
import time
import zlib
from dataclasses import dataclass, field

from .access import readable, target
from .http import Call, HTTPError, Routes, empty_response, iso, json_response, paginate
from .state import unsigned

route = Routes()
VALIDATION_FAILED = "Validation Failed"


@dataclass
class Repo:
    refs: dict[str, str] = field(default_factory=dict)
    """branch name → commit sha"""
    commits: dict[str, dict] = field(default_factory=dict)
    """sha → {tree: {path: blob sha}, parents, message, at}"""
    blobs: dict[str, bytes] = field(default_factory=dict)


def git(world, repo: dict) -> Repo:
    store = world.__dict__.setdefault("git", {})
    return store.setdefault(repo["full_name"].lower(), Repo())


def blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 - Git's object id


def _invalid(detail: str) -> HTTPError:
    return HTTPError(422, f"Invalid request.\n\n{detail}")


def _required(body: dict, *names: str) -> None:
    for name in names:
        if body.get(name) in (None, ""):
            raise _invalid(f'"{name}" wasn\'t supplied.')


# --- commits underneath ----------------------------------------------------------------------------


def commit(world, repo: dict, branch: str, files: dict[str, bytes], message: str) -> str:
    """A new commit on `branch` (created when absent) changing `files`; its sha."""
    store = git(world, repo)
    parent = store.refs.get(branch)
    tree = dict(store.commits[parent]["tree"]) if parent else {}
    for path, data in files.items():
        store.blobs[blob_sha(data)] = data
        tree[path] = blob_sha(data)
    parents = [parent] if parent else []
    sha = hashlib.sha1(f"{parents}{sorted(tree.items())}{message}{time.time_ns()}".encode()).hexdigest()  # noqa: S324
    store.commits[sha] = {"tree": tree, "parents": parents, "message": message, "at": iso()}
    _move(world, repo, branch, sha)
    return sha


def _move(world, repo: dict, branch: str, sha: str) -> None:
    git(world, repo).refs[branch] = sha
    for (key, _), pull in world.pulls.items():
        if key == repo["full_name"].lower() and pull.get("head_ref") == branch and pull["state"] == "open":
            pull["head_sha"] = sha  # an open PR shows its branch's new head


def _descends(store: Repo, sha: str, ancestor: str) -> bool:
    seen, todo = set(), [sha]
    while todo:
        current = todo.pop()
        if current == ancestor:
            return True
        if current not in seen:
            seen.add(current)
            todo += store.commits.get(current, {}).get("parents", [])
    return False


def file_at(world, repo: dict, ref: str, path: str) -> bytes | None:
    store = git(world, repo)
    sha = store.refs.get(ref, ref)
    blob = store.commits.get(sha, {}).get("tree", {}).get(path)
    return store.blobs.get(blob) if blob else None


# --- git refs ----------------------------------------------------------------------------------------


def ref_json(world, repo: dict, branch: str, sha: str) -> dict:
    full = repo["full_name"]
    return {
        "ref": f"refs/heads/{branch}",
        "node_id": base64.b64encode(f"REF_{full}:{branch}".encode()).decode(),
        "url": f"{world.base_url}/repos/{full}/git/refs/heads/{branch}",
        "object": {"sha": sha, "type": "commit", "url": f"{world.base_url}/repos/{full}/git/commits/{sha}"},
    }


def _branch(ref: str) -> str:
    if not ref.startswith("heads/") or len(ref) <= len("heads/"):
        raise HTTPError(404, "Not Found")
    return ref[len("heads/") :]


@route("/repos/<owner>/<name>/git/ref/<path:ref>", "GET")
def ref_get(call: Call, owner: str, name: str, ref: str):
    world = call.standin.world
    repo = readable(call, owner, name)
    branch = _branch(ref)
    sha = git(world, repo).refs.get(branch)
    if sha is None:
        raise HTTPError(404, "Not Found")
    return json_response(ref_json(world, repo, branch, sha))


@route("/repos/<owner>/<name>/git/refs", "POST")
def ref_create(call: Call, owner: str, name: str):
    world = call.standin.world
    repo = target(call, owner, name, "contents")
    body = call.json_object()
    _required(body, "ref", "sha")
    ref, sha = str(body["ref"]), str(body["sha"]).lower()
    if not ref.startswith("refs/") or ref.count("/") < 2:
        raise HTTPError(422, f"{ref} is not a valid ref name.")
    store, branch = git(world, repo), ref.removeprefix("refs/heads/")
    if branch in store.refs:
        raise HTTPError(422, "Reference already exists")
    if sha not in store.commits:
        raise HTTPError(422, "Object does not exist")
    _move(world, repo, branch, sha)
    return json_response(ref_json(world, repo, branch, sha), 201)


@route("/repos/<owner>/<name>/git/refs/<path:ref>", "PATCH")
def ref_update(call: Call, owner: str, name: str, ref: str):
    world = call.standin.world
    repo = target(call, owner, name, "contents")
    body = call.json_object()
    _required(body, "sha")
    store, branch, sha = git(world, repo), _branch(ref), str(body["sha"]).lower()
    if branch not in store.refs:
        raise HTTPError(422, "Reference does not exist")
    if sha not in store.commits:
        raise HTTPError(422, "Object does not exist")
    if not body.get("force") and not _descends(store, sha, store.refs[branch]):
        raise HTTPError(422, "Update is not a fast forward")
    _move(world, repo, branch, sha)
    return json_response(ref_json(world, repo, branch, sha))


@route("/repos/<owner>/<name>/git/refs/<path:ref>", "DELETE")
def ref_delete(call: Call, owner: str, name: str, ref: str):
    world = call.standin.world
    repo = target(call, owner, name, "contents")
    store, branch = git(world, repo), _branch(ref)
    if branch not in store.refs:
        raise HTTPError(422, "Reference does not exist")
    del store.refs[branch]
    return empty_response(204)


# --- contents ----------------------------------------------------------------------------------------


def _content_json(world, repo: dict, ref: str, path: str, data: bytes, with_content: bool = True) -> dict:
    full, sha = repo["full_name"], blob_sha(data)
    url = f"{world.base_url}/repos/{full}/contents/{path}?ref={ref}"
    html = f"https://github.com/{full}/blob/{ref}/{path}"
    found = {
        "type": "file",
        "size": len(data),
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "sha": sha,
        "url": url,
        "git_url": f"{world.base_url}/repos/{full}/git/blobs/{sha}",
        "html_url": html,
        "download_url": f"https://raw.githubusercontent.com/{full}/{ref}/{path}",
        "_links": {"self": url, "git": f"{world.base_url}/repos/{full}/git/blobs/{sha}", "html": html},
    }
    if with_content:
        encoded = base64.b64encode(data).decode()
        # GitHub wraps the base64 at 60 characters a line.
        found.update(encoding="base64", content="".join(f"{encoded[i : i + 60]}\n" for i in range(0, len(encoded), 60)))
    return found


@route("/repos/<owner>/<name>/contents/<path:path>", "GET")
def contents_get(call: Call, owner: str, name: str, path: str):
    world = call.standin.world
    repo = readable(call, owner, name)
    ref = call.request.args.get("ref") or repo["default_branch"]
    store = git(world, repo)
    if ref not in store.refs and ref.lower() not in store.commits:
        raise HTTPError(404, f"No commit found for the ref {ref}")
    data = file_at(world, repo, ref, path)
    if data is None:
        raise HTTPError(404, "Not Found")
    return json_response(_content_json(world, repo, ref, path, data))


@route("/repos/<owner>/<name>/contents/<path:path>", "PUT")
def contents_put(call: Call, owner: str, name: str, path: str):
    world = call.standin.world
    repo = target(call, owner, name, "contents")
    body = call.json_object()
    _required(body, "message", "content")
    try:
        data = base64.b64decode(str(body["content"]), validate=True)
    except (binascii.Error, ValueError):
        raise _invalid("content is not valid Base64") from None
    branch = str(body.get("branch") or repo["default_branch"])
    if branch not in git(world, repo).refs:
        raise HTTPError(404, f"Branch {branch} not found")
    existing = file_at(world, repo, branch, path)
    if existing is not None and not body.get("sha"):
        raise _invalid('"sha" wasn\'t supplied.')
    if existing is not None and str(body["sha"]) != blob_sha(existing):
        raise HTTPError(409, f"{path} does not match {body['sha']}")
    sha = commit(world, repo, branch, {path: data}, str(body["message"]))
    answer = {
        "content": _content_json(world, repo, branch, path, data, with_content=False),
        "commit": _commit_json(world, repo, sha),
    }
    return json_response(answer, 201 if existing is None else 200)


def _commit_json(world, repo: dict, sha: str) -> dict:
    full, entry = repo["full_name"], git(world, repo).commits[sha]
    person = {"name": "crcr-relay[bot]", "email": "crcr-relay[bot]@users.noreply.github.com", "date": entry["at"]}
    return {
        "sha": sha,
        "node_id": base64.b64encode(f"C_{sha}".encode()).decode(),
        "url": f"{world.base_url}/repos/{full}/git/commits/{sha}",
        "html_url": f"https://github.com/{full}/commit/{sha}",
        "author": person,
        "committer": dict(person),
        "message": entry["message"],
        "tree": {"sha": sha, "url": f"{world.base_url}/repos/{full}/git/trees/{sha}"},
        "parents": [
            {
                "sha": p,
                "url": f"{world.base_url}/repos/{full}/git/commits/{p}",
                "html_url": f"https://github.com/{full}/commit/{p}",
            }
            for p in entry["parents"]
        ],
        "verification": unsigned(),
    }


# --- pull requests -----------------------------------------------------------------------------------


def _failed(*errors: dict) -> HTTPError:
    return HTTPError(422, VALIDATION_FAILED, errors=list(errors))


def _pull_error(code: str, field_name: str | None = None, message: str | None = None) -> dict:
    error = {"resource": "PullRequest", "code": code}
    if field_name:
        error["field"] = field_name
    if message:
        error["message"] = message
    return error


@route("/repos/<owner>/<name>/pulls", "POST")
def pull_create(call: Call, owner: str, name: str):
    world = call.standin.world
    repo = target(call, owner, name, "pull_requests")
    body = call.json_object()
    for required in ("title", "head", "base"):
        if not isinstance(body.get(required), str) or not body[required]:
            raise _failed(_pull_error("missing_field", required))
    store, key = git(world, repo), repo["full_name"].lower()
    head = body["head"].split(":", 1)[-1]
    if head not in store.refs:
        raise _failed(_pull_error("invalid", "head"))
    if body["base"] not in store.refs:
        raise _failed(_pull_error("invalid", "base"))
    if _open_pull(world, key, head, body["base"]) is not None:
        raise _failed(
            _pull_error(
                "custom", message=f"A pull request already exists for {repo['full_name'].split('/')[0]}:{head}."
            )
        )
    if store.refs[head] == store.refs[body["base"]]:
        raise _failed(_pull_error("custom", message=f"No commits between {body['base']} and {head}"))
    number = max((n for r, n in world.pulls if r == key), default=0) + 1
    world.add_pull(
        repo["full_name"],
        number,
        store.refs[head],
        title=body["title"],
        user=world.bot_user()["login"],
        head_ref=head,
        base_ref=body["base"],
        base_sha=store.refs[body["base"]],
        draft=bool(body.get("draft")),
    )
    pull = world.pulls[(key, number)]
    pull.update(body=body.get("body") or None, closed_at=None, merged_at=None)
    return json_response(world.pull_json(repo, pull), 201)


def _open_pull(world, key: str, head: str, base: str) -> dict | None:
    for (repo_key, _), pull in world.pulls.items():
        if repo_key == key and pull["state"] == "open" and pull["head_ref"] == head and pull["base_ref"] == base:
            return pull
    return None


@route("/repos/<owner>/<name>/pulls", "GET")
def pulls_list(call: Call, owner: str, name: str):
    world = call.standin.world
    repo = readable(call, owner, name)
    args, key = call.request.args, repo["full_name"].lower()
    state = args.get("state", "open")
    if state not in ("open", "closed", "all"):
        raise _invalid(f'For \'state\', "{state}" is not a member of ["open", "closed", "all"].')
    found = [p for (r, _), p in sorted(world.pulls.items(), reverse=True) if r == key]
    found = [p for p in found if state == "all" or p["state"] == state]
    if args.get("head"):
        head_owner, _, head_ref = args["head"].partition(":")
        found = [
            p for p in found if p["head_ref"] == head_ref and p["head_repo"].split("/")[0].lower() == head_owner.lower()
        ]
    if args.get("base"):
        found = [p for p in found if p["base_ref"] == args["base"]]
    page, headers = paginate(call, [world.pull_json(repo, p) for p in found])
    return json_response(page, headers=headers)


@route("/repos/<owner>/<name>/pulls/<int:number>", "PATCH")
def pull_update(call: Call, owner: str, name: str, number: int):
    world = call.standin.world
    repo = target(call, owner, name, "pull_requests")
    pull = world.pulls.get((repo["full_name"].lower(), number))
    if pull is None:
        raise HTTPError(404, "Not Found")
    body = call.json_object()
    if body.get("state") not in (None, "open", "closed"):
        raise _invalid(f'For \'properties/state\', "{body["state"]}" is not a member of ["open", "closed"].')
    for name_ in ("title", "body"):
        if isinstance(body.get(name_), str):
            pull[name_] = body[name_]
    if body.get("state") == "closed" and pull["state"] == "open":
        pull.update(state="closed", closed_at=iso())
    elif body.get("state") == "open" and pull["state"] == "closed" and not pull["merged"]:
        pull.update(state="open", closed_at=None)
    return json_response(world.pull_json(repo, pull))


@route("/repos/<owner>/<name>/issues/<int:number>/labels", "POST")
def labels_add(call: Call, owner: str, name: str, number: int):
    world = call.standin.world
    repo = target(call, owner, name, "issues", alternative="pull_requests")
    pull = world.pulls.get((repo["full_name"].lower(), number))
    if pull is None:
        raise HTTPError(404, "Not Found")
    body = call.json
    names = body.get("labels") if isinstance(body, dict) else body
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise _invalid("For 'properties/labels', the labels must be a non-empty list of names.")
    pull["labels"] = list(dict.fromkeys([*pull["labels"], *names]))
    labels = [{"id": zlib.crc32(n.encode()), "name": n, "color": "ededed", "default": False} for n in pull["labels"]]
    return json_response(labels)


# --- steering (tests and the sandbox) ----------------------------------------------------------------


def pull_close(world, full_name: str, number: int, merged: bool = False) -> dict:
    """A person closes (or merges) a pull request on GitHub; merging brings the head's files into
    the base branch as a new commit."""
    repo = world.repo(*full_name.split("/", 1))
    pull = world.pulls[(repo["full_name"].lower(), int(number))]
    if merged:
        store = git(world, repo)
        head_tree = store.commits[store.refs[pull["head_ref"]]]["tree"]
        files = {path: store.blobs[sha] for path, sha in head_tree.items()}
        commit(world, repo, pull["base_ref"], files, f"Merge pull request #{number}")
    pull.update(state="closed", closed_at=iso(), merged=merged, merged_at=iso() if merged else None)
    return world.pull_json(repo, pull)
