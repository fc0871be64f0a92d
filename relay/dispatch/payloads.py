"""What the relay sends downstream: the `client_payload` of a repository_dispatch.

GitHub refuses a client_payload over 64 KB or with more than 10 top-level keys. Ours has four
(`event_type`, `delivery_id`, `payload`, `callback_token`); the upstream webhook in `payload` is
sent verbatim when it fits, and otherwise trimmed step by step, keeping every field downstream
workflows read (repository, action, number, pull_request head/base/labels, push ref/before/after)."""

from django.conf import settings

from ..github.client import json_bytes

CLIENT_PAYLOAD_LIMIT_BYTES = 64 * 1024
SAFETY_MARGIN_BYTES = 1024
"""Room for the callback token and JSON framing around the payload."""

TEXT_LIMIT = 2000
PR_KEYS = (
    "number",
    "title",
    "state",
    "draft",
    "merged",
    "merge_commit_sha",
    "html_url",
    "user",
    "labels",
    "head",
    "base",
    "created_at",
    "updated_at",
    "author_association",
)
BRANCH_KEYS = ("label", "ref", "sha", "repo")
REPO_KEYS = ("id", "name", "full_name", "owner", "private", "html_url", "default_branch")
USER_KEYS = ("login", "id", "type")
COMMIT_KEYS = ("id", "message", "timestamp", "url", "author")


def client_payload(event_type: str, delivery_id: str, payload: dict, callback_token: str) -> dict:
    body = {"event_type": event_type, "delivery_id": delivery_id, "payload": payload, "callback_token": callback_token}
    for trim in (_drop_api_urls, _trim_long_text, _essentials, _minimal):
        if _size(body) <= CLIENT_PAYLOAD_LIMIT_BYTES - SAFETY_MARGIN_BYTES:
            return body
        body = {**body, "payload": {**trim(body["payload"]), "crcr_trimmed": True}}
    return body


def probe_client_payload(event_type: str, delivery_id: str, sha: str, bisect: dict, callback_token: str) -> dict:
    """A bisection probe's client_payload: the usual keys (so the callback client echoes it as it
    echoes any dispatch), `payload.head_sha` naming the commit to test, and `bisect` saying which
    bisection and probe it is and which tests to run (relay.bisect.probes.probe_payload). Five
    keys; the tests of one bisection are few, so it stays far inside 64 KB."""
    payload = {"head_sha": sha, "after": sha, "repository": {"full_name": settings.CRCR_UPSTREAM_REPO}}
    return {
        "event_type": event_type,
        "delivery_id": delivery_id,
        "payload": payload,
        "callback_token": callback_token,
        "bisect": bisect,
    }


def _size(value) -> int:
    """Measured on the bytes the client sends."""
    return len(json_bytes(value))


def _drop_api_urls(value):
    """The `*_url` templates are most of a webhook's bytes and no workflow reads them."""
    if isinstance(value, dict):
        return {k: _drop_api_urls(v) for k, v in value.items() if not (k.endswith("_url") and k != "html_url")}
    if isinstance(value, list):
        return [_drop_api_urls(v) for v in value]
    return value


def _trim_long_text(value):
    if isinstance(value, dict):
        return {k: _trim_long_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trim_long_text(v) for v in value]
    if isinstance(value, str) and len(value) > TEXT_LIMIT:
        return value[:TEXT_LIMIT] + "…"
    return value


def _pick(obj, keys):
    return {k: obj[k] for k in keys if isinstance(obj, dict) and k in obj}


def _repo(obj):
    if not isinstance(obj, dict):
        return obj
    repo = _pick(obj, REPO_KEYS)
    if "owner" in repo:
        repo["owner"] = _pick(repo["owner"], USER_KEYS)
    return repo


def _branch(obj):
    branch = _pick(obj, BRANCH_KEYS)
    if "repo" in branch:
        branch["repo"] = _repo(branch["repo"])
    return branch


def _pull_request(pr):
    out = _pick(pr, PR_KEYS)
    out["user"] = _pick(pr.get("user"), USER_KEYS)
    out["labels"] = [_pick(label, ("name",)) for label in pr.get("labels") or []]
    for side in ("head", "base"):
        if side in out:
            out[side] = _branch(out[side])
    return out


def _essentials(payload: dict) -> dict:
    out = {
        k: v
        for k, v in payload.items()
        if k not in ("pull_request", "repository", "sender", "organization", "commits", "installation")
    }
    out["repository"] = _repo(payload.get("repository"))
    out["sender"] = _pick(payload.get("sender"), USER_KEYS)
    if "installation" in payload:
        out["installation"] = _pick(payload["installation"], ("id",))
    if "pull_request" in payload:
        out["pull_request"] = _pull_request(payload["pull_request"])
    if "commits" in payload:
        out["commits"] = [_pick(c, COMMIT_KEYS) for c in payload["commits"][-20:]]
    return out


def _minimal(payload: dict) -> dict:
    """Last resort: only what identifies the change."""
    keys = ("action", "number", "ref", "before", "after", "created", "deleted", "forced", "label")
    out = _pick(payload, keys)
    out["repository"] = _pick(payload.get("repository"), ("id", "full_name"))
    if "pull_request" in payload:
        pr = payload["pull_request"]
        out["pull_request"] = {
            "number": pr.get("number"),
            "title": (pr.get("title") or "")[:200],
            "html_url": pr.get("html_url"),
            "labels": [_pick(label, ("name",)) for label in pr.get("labels") or []],
            "head": {
                "sha": pr["head"].get("sha"),
                "ref": pr["head"].get("ref"),
                "repo": _pick(pr["head"].get("repo"), ("full_name",)),
            },
            "base": {
                "sha": pr["base"].get("sha"),
                "ref": pr["base"].get("ref"),
                "repo": _pick(pr["base"].get("repo"), ("full_name",)),
            },
        }
    if isinstance(payload.get("head_commit"), dict):
        out["head_commit"] = {
            "id": payload["head_commit"].get("id"),
            "message": (payload["head_commit"].get("message") or "")[:500],
        }
    return out
