"""Response helpers shaped like api.github.com: JSON bodies, error bodies, pagination links."""

import json
import math
import time
from dataclasses import dataclass
from functools import cached_property
from http import HTTPStatus
from urllib.parse import urlencode

from werkzeug.routing import Rule
from werkzeug.wrappers import Request, Response

DOCS_URL = "https://docs.github.com/rest"
JSON_TYPE = "application/json; charset=utf-8"


class HTTPError(Exception):
    """Raised anywhere in a handler; turned into GitHub's error body by the dispatcher."""

    def __init__(self, status: int, message: str, headers: dict | None = None, errors: list | None = None):
        super().__init__(message)
        self.status, self.message, self.headers, self.errors = status, message, headers or {}, errors

    def response(self) -> Response:
        return error_response(self.status, self.message, self.headers, self.errors)


def json_response(data, status: int = 200, headers: dict | None = None) -> Response:
    return Response(json.dumps(data), status=status, headers=headers, content_type=JSON_TYPE)


def error_response(status: int, message: str, headers: dict | None = None, errors: list | None = None) -> Response:
    """GitHub's error body; a 422 "Validation Failed" also lists its `errors`."""
    body = {"message": message, **({"errors": errors} if errors else {}), "documentation_url": DOCS_URL}
    return json_response(body, status, headers)


def empty_response(status: int = 204) -> Response:
    response = Response(status=status)
    del response.headers["Content-Type"]  # GitHub's 204s carry no body and no type
    return response


def status_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def iso(ts: float | None = None) -> str:
    """GitHub's timestamp format: UTC, seconds, trailing Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if ts is None else ts))


@dataclass
class Call:
    """One request as handlers see it: the stand-in, the werkzeug request and its raw body."""

    standin: object
    request: Request
    body: bytes = b""

    @cached_property
    def json(self):
        """The body as JSON; GitHub answers 400 'Problems parsing JSON' when it is not."""
        if not self.body.strip():
            return None
        try:
            return json.loads(self.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise HTTPError(400, "Problems parsing JSON") from exc

    def json_object(self) -> dict:
        body = self.json
        if body is None:
            return {}
        if not isinstance(body, dict):
            raise HTTPError(422, f"Invalid request.\n\nFor 'links/0/schema', {json.dumps(body)} is not an object.")
        return body

    def int_arg(self, name: str, default: int) -> int:
        try:
            return int(self.request.args.get(name, default))
        except (TypeError, ValueError):
            return default


def paginate(call: Call, items: list, default_per_page: int = 30) -> tuple[list, dict]:
    """One page of `items` and the `link` header GitHub would send (prev, next, last, first)."""
    per_page = min(max(call.int_arg("per_page", default_per_page), 1), 100)
    page = max(call.int_arg("page", 1), 1)
    last = max(1, math.ceil(len(items) / per_page))
    chunk = items[(page - 1) * per_page : page * per_page]
    rels = []
    if page > 1:
        rels.append(("prev", min(page - 1, last)))
    if page < last:
        rels += [("next", page + 1), ("last", last)]
    if page > 1:
        rels.append(("first", 1))
    link = ", ".join(f'<{_page_url(call, number)}>; rel="{rel}"' for rel, number in rels)
    return chunk, ({"link": link} if link else {})


def _page_url(call: Call, page: int) -> str:
    args = call.request.args.copy()
    args["page"] = str(page)
    return f"{call.request.base_url}?{urlencode(list(args.items(multi=True)))}"


class Routes:
    """A module's URL rules; the dispatcher merges every module's into one werkzeug Map."""

    def __init__(self):
        self.rules: list[Rule] = []

    def __call__(self, path: str, *methods: str):
        def register(handler):
            self.rules.append(Rule(path, methods=list(methods), endpoint=handler))
            return handler

        return register
