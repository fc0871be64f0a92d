"""The shape of the webhook fields the relay reads, checked once at the door.

GitHub never sends `head: null` or `labels: "bug"`, but a signed body can say anything; rather than
make every reader defensive, each field a reader relies on is declared here with its JSON type,
and a delivery that contradicts one is refused (400, naming the field) before anything is stored.
A field that is absent is fine (readers default it); `?` marks a field GitHub sends as null.
Items of `pull_request.labels` are not checked: their readers skip what is not a label object."""

import re


class ShapeError(ValueError):
    """400: a field has a type GitHub never sends."""


STR, INT, BOOL, OBJ, LIST = "string", "integer", "boolean", "object", "array"
NUMBER = "PR number"
"""A PR number: an integer the database's int column holds. Ids (INT) are below 2**63."""
SHA = "commit SHA (40 hex characters)"
"""A commit id as GitHub writes it: pages link, shorten and look up by it, so `abc` or markup is
refused here rather than stored for every reader to trip on."""
_SHA = re.compile(r"[0-9a-f]{40}", re.ASCII | re.IGNORECASE)
COMMON = {
    "action": STR,
    "repository": OBJ,
    "repository.full_name": STR,
    "repository.id": INT,
    "repository.default_branch": STR,
    "sender": OBJ + "?",
    "sender.login": STR,
    "installation": OBJ,
    "installation.id": INT,
    "installation.account": OBJ + "?",
    "installation.account.login": STR,
    "installation.repository_selection": STR + "?",
    "installation.suspended_at": STR + "?",
}
BY_EVENT = {
    "pull_request": {
        "number": NUMBER,
        "pull_request": OBJ,
        "pull_request.number": NUMBER,
        "pull_request.title": STR + "?",
        "pull_request.updated_at": STR + "?",
        "pull_request.head": OBJ,
        "pull_request.head.sha": SHA,
        "pull_request.base": OBJ + "?",
        "pull_request.base.sha": SHA,
        "pull_request.head.ref": STR,
        "pull_request.user": OBJ + "?",
        "pull_request.user.login": STR,
        "pull_request.labels": LIST,
        "label": OBJ,
        "label.name": STR,
    },
    "push": {
        "ref": STR,
        "before": SHA,
        "after": SHA,
        "deleted": BOOL,
        "commits": LIST,
        "commits[]": OBJ,
        "commits[].id": SHA,
        "commits[].message": STR + "?",
        "commits[].timestamp": STR + "?",
        "commits[].author": OBJ + "?",
        "commits[].author.name": STR + "?",
        "commits[].author.username": STR + "?",
        "head_commit": OBJ + "?",
        "head_commit.id": SHA,
        "head_commit.message": STR + "?",
        "head_commit.timestamp": STR + "?",
        "head_commit.author": OBJ + "?",
        "head_commit.author.name": STR + "?",
        "head_commit.author.username": STR + "?",
    },
    "check_run": {
        "check_run": OBJ,
        "check_run.id": INT,
        "check_run.name": STR,
        "check_run.external_id": STR + "?",
        "check_run.app": OBJ + "?",
        "check_run.app.id": INT,
    },
    "check_suite": {"check_suite": OBJ, "check_suite.id": INT, "check_suite.app": OBJ + "?", "check_suite.app.id": INT},
    "installation_repositories": {
        "repositories_added": LIST,
        "repositories_added[]": OBJ,
        "repositories_added[].full_name": STR,
        "repositories_added[].id": INT,
        "repositories_removed": LIST,
        "repositories_removed[]": OBJ,
        "repositories_removed[].full_name": STR,
    },
    "installation": {
        "repositories": LIST + "?",
        "repositories[]": OBJ,
        "repositories[].full_name": STR,
        "repositories[].id": INT,
    },
}
_TYPES = {STR: str, INT: int, NUMBER: int, SHA: str, BOOL: bool, OBJ: dict, LIST: list}
_RANGES = {INT: (0, 2**63 - 1), NUMBER: (1, 2**31 - 1)}


def payload_shape_check(event: str, payload: dict) -> None:
    for path, kind in {**COMMON, **BY_EVENT.get(event, {})}.items():
        for value in _values_at(payload, path):
            if not _fits(value, kind):
                raise ShapeError(
                    f"field '{path}' must be {'null or ' if kind.endswith('?') else ''}{_describe(kind)}, got {_json_type(value)}"
                )


def _values_at(payload: dict, path: str):
    """Every value found at `path` (`[]` steps into each list item); nothing where it is absent."""
    found = [payload]
    for step in path.split("."):
        many = step.endswith("[]")
        key = step.removesuffix("[]")
        found = [item[key] for item in found if isinstance(item, dict) and key in item]
        if many:
            found = [element for item in found if isinstance(item, list) for element in item]
    return found


def _fits(value, kind: str) -> bool:
    if value is None:
        return kind.endswith("?")
    expected = _TYPES[kind.rstrip("?")]
    if expected is int:
        low, high = _RANGES[kind.rstrip("?")]
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    if kind.rstrip("?") == SHA:
        return isinstance(value, str) and _SHA.fullmatch(value) is not None
    return isinstance(value, expected)


def _describe(kind: str) -> str:
    kind = kind.rstrip("?")
    if kind == SHA:
        return "a " + SHA
    return f"an integer from {_RANGES[kind][0]} to {_RANGES[kind][1]}" if kind in _RANGES else kind


def _json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return f"integer {value}" if abs(value) < 10**12 else "a too-large integer"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    return next((name for name, kind in _TYPES.items() if isinstance(value, kind)), "number")
