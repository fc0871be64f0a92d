"""The Checks API: create, update, read and list check runs with GitHub's validation rules."""

import json

from .access import readable, target
from .http import Call, HTTPError, Routes, iso, json_response, paginate
from .state import HEX40

route = Routes()

STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
CONCLUSIONS = ("action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out")
TEXT_LIMIT = 65535
"""output.summary and output.text are capped at 65,535 characters."""
ANNOTATIONS_PER_REQUEST = 50


def _invalid(detail: str) -> HTTPError:
    return HTTPError(422, f"Invalid request.\n\n{detail}")


def _check_enum(body: dict, name: str, allowed: tuple) -> None:
    value = body.get(name)
    if value is not None and value not in allowed:
        listed = ", ".join(json.dumps(v) for v in allowed)
        raise _invalid(f"For 'properties/{name}', {json.dumps(value)} is not a member of [{listed}].")


def _check_output(output, creating: bool) -> None:
    if not isinstance(output, dict):
        raise _invalid(f"For 'properties/output', {json.dumps(output)} is not an object.")
    for name in ("title", "summary") if creating else ("summary",):
        if not isinstance(output.get(name), str):
            raise _invalid(f'"{name}" wasn\'t supplied.')
    for name in ("summary", "text"):
        if isinstance(output.get(name), str) and len(output[name]) > TEXT_LIMIT:
            raise _invalid(
                f"For 'properties/{name}', only {TEXT_LIMIT} characters are allowed; {len(output[name])} were supplied."
            )
    if len(output.get("annotations") or []) > ANNOTATIONS_PER_REQUEST:
        raise _invalid(f"For 'properties/annotations', no more than {ANNOTATIONS_PER_REQUEST} items are allowed.")


def validate(body: dict, existing: dict | None) -> None:
    """422s GitHub sends for a create (`existing` None) or an update of `existing`."""
    for name in ("name", "head_sha") if existing is None else ():
        if not isinstance(body.get(name), str) or not body[name]:
            raise _invalid(f'"{name}" wasn\'t supplied.')
    _check_enum(body, "status", STATUSES)
    _check_enum(body, "conclusion", CONCLUSIONS)
    completing = body.get("status") == "completed" or body.get("completed_at") is not None
    if completing and body.get("conclusion") is None and not (existing and existing["conclusion"]):
        raise _invalid('"conclusion" wasn\'t supplied.')
    if "output" in body:
        _check_output(body["output"], existing is None)
    if len(body.get("actions") or []) > 3:
        raise _invalid("For 'properties/actions', no more than 3 items are allowed.")


def _check_head_sha(world, repo: dict, head_sha: str) -> str:
    """Any 40-hex sha when the repo has no registered commits, else one of them."""
    sha = head_sha.lower()
    known = world.commits.get(repo["full_name"].lower())
    if not HEX40.fullmatch(sha) or (known and sha not in known):
        raise HTTPError(422, f"No commit found for SHA: {head_sha}")
    return sha


def _new_run(world, repo: dict, head_sha: str) -> dict:
    number, full = next(world.check_run_ids), repo["full_name"]
    url = f"{world.base_url}/repos/{full}/check-runs/{number}"
    return {
        "id": number,
        "name": "",
        "node_id": f"CR_kwDO{number:x}",
        "head_sha": head_sha,
        "external_id": "",
        "url": url,
        "html_url": f"https://github.com/{full}/runs/{number}",
        "details_url": f"https://github.com/apps/{world.app_slug}",
        "status": "queued",
        "conclusion": None,
        "started_at": iso(),
        "completed_at": None,
        "output": {
            "title": None,
            "summary": None,
            "text": None,
            "annotations_count": 0,
            "annotations_url": f"{url}/annotations",
        },
        "check_suite": {"id": world.suite_id(repo, head_sha)},
        "app": world.app_brief(),
        "pull_requests": world.pull_refs(repo, head_sha),
    }


def _apply(run: dict, body: dict) -> None:
    for name in ("name", "details_url", "external_id", "started_at"):
        if body.get(name) is not None:
            run[name] = body[name]
    if body.get("status") is not None:
        run["status"] = body["status"]
        if body["status"] != "completed":
            run["conclusion"] = run["completed_at"] = None
    if body.get("conclusion") is not None:
        # A conclusion always completes the run, whatever status says.
        run["status"], run["conclusion"] = "completed", body["conclusion"]
        run["completed_at"] = body.get("completed_at") or iso()
    if isinstance(body.get("output"), dict):
        _apply_output(run["output"], body["output"])


def _apply_output(output: dict, given: dict) -> None:
    for name in ("title", "summary", "text"):
        if name in given:
            output[name] = given[name]
    output["annotations_count"] += len(given.get("annotations") or [])  # annotations append


def _stored(world, repo: dict, run_id: int) -> dict:
    entry = world.check_runs.get(run_id)
    if entry is None or entry["repo"] != repo["full_name"].lower():
        raise HTTPError(404, "Not Found")
    return entry["run"]


@route("/repos/<owner>/<name>/check-runs", "POST")
def check_run_create(call: Call, owner: str, name: str):
    world = call.standin.world
    repo = target(call, owner, name, "checks")
    body = call.json_object()
    validate(body, None)
    run = _new_run(world, repo, _check_head_sha(world, repo, body["head_sha"]))
    _apply(run, body)
    world.check_runs[run["id"]] = {"repo": repo["full_name"].lower(), "run": run}
    return json_response(run, 201)


@route("/repos/<owner>/<name>/check-runs/<int:run_id>", "PATCH")
def check_run_update(call: Call, owner: str, name: str, run_id: int):
    world = call.standin.world
    repo = target(call, owner, name, "checks")
    run = _stored(world, repo, run_id)
    body = call.json_object()
    validate(body, run)
    _apply(run, body)
    return json_response(run)


@route("/repos/<owner>/<name>/check-runs/<int:run_id>", "GET")
def check_run_get(call: Call, owner: str, name: str, run_id: int):
    repo = readable(call, owner, name)
    return json_response(_stored(call.standin.world, repo, run_id))


@route("/repos/<owner>/<name>/check-runs/<int:run_id>/rerequest", "POST")
def check_run_rerequest(call: Call, owner: str, name: str, run_id: int):
    repo = target(call, owner, name, "checks")
    _stored(call.standin.world, repo, run_id)
    return json_response({}, 201)


def _listing(call: Call, runs: list[dict]):
    args = call.request.args
    if args.get("check_name"):
        runs = [r for r in runs if r["name"] == args["check_name"]]
    if args.get("status"):
        runs = [r for r in runs if r["status"] == args["status"]]
    if args.get("filter", "latest") == "latest":
        # GitHub's default: only the newest run of each name.
        newest = {r["name"]: r for r in sorted(runs, key=lambda r: r["id"])}
        runs = list(newest.values())
    runs = sorted(runs, key=lambda r: r["id"], reverse=True)
    page, headers = paginate(call, runs)
    return json_response({"total_count": len(runs), "check_runs": page}, headers=headers)


def _repo_runs(world, repo: dict) -> list[dict]:
    return [e["run"] for e in world.check_runs.values() if e["repo"] == repo["full_name"].lower()]


@route("/repos/<owner>/<name>/commits/<path:ref>/check-runs", "GET")
def check_runs_for_ref(call: Call, owner: str, name: str, ref: str):
    world = call.standin.world
    repo = readable(call, owner, name)
    sha = world.resolve_sha(repo, ref) or ref.lower()
    if not HEX40.fullmatch(sha):
        raise HTTPError(422, f"No commit found for SHA: {ref}")
    return _listing(call, [r for r in _repo_runs(world, repo) if r["head_sha"] == sha])


@route("/repos/<owner>/<name>/check-suites/<int:suite_id>/check-runs", "GET")
def check_runs_for_suite(call: Call, owner: str, name: str, suite_id: int):
    world = call.standin.world
    repo = readable(call, owner, name)
    if (repo["full_name"].lower(), suite_id) not in {(r, s) for (r, _), s in world.suites.items()}:
        raise HTTPError(404, "Not Found")
    return _listing(call, [r for r in _repo_runs(world, repo) if r["check_suite"]["id"] == suite_id])
