"""Routes that are not GitHub's REST API: the OIDC issuers, and `/_standin/` control endpoints
that let sandbox mode and benchmarks in other processes steer and observe the stand-in."""

import re
import secrets

from .http import Call, HTTPError, Routes, empty_response, json_response
from .oidc import KINDS

route = Routes()


def _issuer(call: Call, kind: str):
    if kind not in KINDS:
        raise HTTPError(404, "Not Found")
    return call.standin.oidc.get(kind)


# --- OIDC issuers -----------------------------------------------------------------------------------


@route("/oidc/<kind>/.well-known/openid-configuration", "GET")
def oidc_discovery(call: Call, kind: str):
    return json_response(_issuer(call, kind).discovery())


@route("/oidc/<kind>/.well-known/jwks", "GET")
def oidc_jwks(call: Call, kind: str):
    return json_response(_issuer(call, kind).jwks())


@route("/oidc/gitlab/oauth/discovery/keys", "GET")
def oidc_gitlab_keys(call: Call):
    return json_response(_issuer(call, "gitlab").jwks())


# --- observing --------------------------------------------------------------------------------------


@route("/_standin/journal", "GET")
def journal_get(call: Call):
    journal = call.standin.world.journal
    since = max(call.int_arg("since", 0), 0)
    entries = [entry.summary(index) for index, entry in enumerate(journal) if index >= since]
    return json_response({"requests": entries, "next": len(journal)})


@route("/_standin/dispatches", "GET")
def dispatches_get(call: Call):
    return json_response(call.standin.dispatches)


@route("/_standin/check-runs", "GET")
def check_runs_get(call: Call):
    return json_response(call.standin.check_runs)


@route("/_standin/comments", "GET")
def comments_get(call: Call):
    return json_response(call.standin.comments)


@route("/_standin/reruns", "GET")
def reruns_get(call: Call):
    return json_response(call.standin.reruns)


# --- steering ---------------------------------------------------------------------------------------


def _fields(call: Call, *required: str) -> dict:
    body = call.json_object()
    missing = [name for name in required if name not in body]
    if missing:
        raise HTTPError(400, f"missing fields: {', '.join(missing)}")
    return body


def _seed(add, body: dict):
    try:
        return json_response(add(**body), 201)
    except (TypeError, ValueError) as exc:
        raise HTTPError(400, str(exc)) from None


@route("/_standin/faults", "POST")
def faults_add(call: Call):
    body = _fields(call, "path")
    options = {name: body[name] for name in ("status", "retry_after", "delay", "body", "headers") if name in body}
    try:
        call.standin.fail(body.get("method"), body["path"], times=body.get("times", 1), **options)
    except (re.error, TypeError) as exc:
        raise HTTPError(400, f"bad fault: {exc}") from None
    return json_response({"ok": True}, 201)


@route("/_standin/faults", "DELETE")
def faults_clear(call: Call):
    call.standin.clear_faults()
    return empty_response(204)


@route("/_standin/latency", "POST")
def latency_set(call: Call):
    try:
        seconds = float(_fields(call, "seconds")["seconds"])
    except (TypeError, ValueError):
        raise HTTPError(400, "seconds must be a number") from None
    call.standin.set_latency(seconds)
    return json_response({"seconds": seconds})


@route("/_standin/reset", "POST")
def reset(call: Call):
    call.standin.reset()
    return empty_response(204)


@route("/_standin/installations", "POST")
def installation_add(call: Call):
    return _seed(call.standin.add_installation, _fields(call, "installation_id", "account"))


@route("/_standin/repos", "POST")
def repo_add(call: Call):
    return _seed(call.standin.add_repo, _fields(call, "full_name"))


@route("/_standin/commits", "POST")
def commit_add(call: Call):
    return _seed(call.standin.add_commit, _fields(call, "repo", "sha"))


@route("/_standin/pulls", "POST")
def pull_add(call: Call):
    return _seed(call.standin.add_pull, _fields(call, "repo", "number", "head_sha"))


@route("/_standin/pulls/<owner>/<name>", "GET")
def pulls_get(call: Call, owner: str, name: str):
    return json_response(call.standin.pulls(f"{owner}/{name}"))


@route("/_standin/pulls/<owner>/<name>/<int:number>/close", "POST")
def pull_close(call: Call, owner: str, name: str, number: int):
    """A person closes (`{"merged": true}`: merges) a pull request on GitHub."""
    try:
        return json_response(call.standin.close_pull(f"{owner}/{name}", number, bool(call.json_object().get("merged"))))
    except KeyError:
        raise HTTPError(404, "no such pull request") from None


@route("/_standin/files", "POST")
def file_add(call: Call):
    body = _fields(call, "repo", "path", "text")
    return json_response(
        {"sha": call.standin.add_file(body["repo"], body["path"], body["text"], body.get("branch", "main"))}, 201
    )


@route("/_standin/runs/running", "POST")
def run_running_set(call: Call):
    body = _fields(call, "repo", "run_id")
    call.standin.set_run_running(body["repo"], body["run_id"], body.get("running", True))
    return empty_response(204)


# --- OIDC tokens on demand --------------------------------------------------------------------------

MINT_OPTIONS = ("audience", "lifetime", "key", "alg", "headers", "omit")


@route("/_standin/oidc/token", "POST")
def oidc_token(call: Call):
    body = _fields(call, "kind")
    options = {name: body[name] for name in MINT_OPTIONS if name in body}
    claims = body.get("claims") or {}
    try:
        return json_response({"value": call.standin.oidc.mint(body["kind"], **options, **claims)})
    except (TypeError, ValueError) as exc:
        raise HTTPError(400, str(exc)) from None


@route("/_standin/actions/id-token", "GET")
def actions_id_token(call: Call):
    """GitHub Actions' ACTIONS_ID_TOKEN_REQUEST_URL: a bearer request token in, an ID token out."""
    scheme, _, token = call.request.headers.get("Authorization", "").partition(" ")
    claims = call.standin.world.actions_tokens.get(token.strip()) if scheme.lower() == "bearer" else None
    if claims is None:
        raise HTTPError(401, "Bad credentials")
    owner = claims["repository"].split("/")[0]
    audience = call.request.args.get("audience") or f"https://github.com/{owner}"
    return json_response({"value": call.standin.oidc.mint("github", audience=audience, **claims)})


def new_actions_token(world, claims: dict) -> str:
    token = secrets.token_urlsafe(24)
    world.actions_tokens[token] = dict(claims)
    return token
