"""JSON from outside (webhooks, callbacks, the JSON-text fields inside a callback, a token's
header and claims) read so that whatever parses can be stored and encoded again.

Python's `json` reads `NaN`, `Infinity` and numbers past a double's range (`1e999`, read as
infinity); no database's JSON column accepts them, so the row would fail only when saved, after
every other check passed — a 500. Here they are refused at parse time, naming where they sit.

Nesting is capped at MAX_DEPTH levels, far below every encoder and decoder that meets the value
later: orjson reads 1,024 levels, but the save's `json.dumps` and `json.loads` recurse once per
level against Python's recursion limit (1,000, less what the request's stack already uses), so
a body 1,000 levels deep was read and then failed to save (a 500). `checked` also refuses what
no text column stores: a NUL, a lone surrogate.

orjson reads first: it refuses all of those numbers by itself and reads a 21 KB callback in under
half the time (docs/performance.md, "Where each millisecond goes"). Whatever it refuses is read
again by `json`, so an accepted body, a refused one and every error message are exactly what
`json` alone gives (json also reads UTF-16/32 and integers of any size, which orjson refuses).
One difference is kept: orjson reads an integer too large for 64 bits as the nearest double,
where `json` keeps every digit; no field of a webhook or a callback holds such a number."""

import json
import math

import orjson

MAX_DEPTH = 64
"""GitHub's webhook payloads nest about 8 levels, a callback about 5."""


class NotStorable(ValueError):
    """A 400: the message names the value's place (`workflow.environment.x`) or what it is."""


class _Unbounded(Exception):
    pass


def loads(raw, *, what: str = "body", max_depth: int = MAX_DEPTH):
    """json.loads, refusing NaN/±Infinity, numbers no double holds and nesting past `max_depth`."""
    try:
        value = _parsed(raw, what)
    except RecursionError:
        raise NotStorable(f"{what} is nested deeper than {max_depth} levels") from None
    if isinstance(value, dict | list) and _openers_over(raw, max_depth) and _depth_over(value, max_depth):
        raise NotStorable(f"{what} is nested deeper than {max_depth} levels")
    return value


def checked(raw, *, what: str = "body", max_depth: int = MAX_DEPTH):
    """`loads`, also refusing a NUL or a lone surrogate in any key or string: what a callback
    body and every JSON text inside it must pass before any of it is read."""
    value = loads(raw, what=what, max_depth=max_depth)
    if _may_hide_unstorable_text(raw):
        unstorable = unstorable_text(value)
        if unstorable:
            raise NotStorable(f"{what} contains {unstorable}")
    return value


def unstorable_text(value) -> str:
    """What in `value`'s keys and strings no text column stores ("a NUL character", "a lone
    surrogate, …"), or "" when nothing; iterative, any depth."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "a NUL character"
            if not _encodes(item):
                return "a lone surrogate, which is not valid Unicode text"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return ""


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _may_hide_unstorable_text(raw) -> bool:
    """Whether a NUL or a lone surrogate could be in the parsed strings. JSON text cannot carry a
    raw NUL or control character in a string, so one arrives only as a `\\u` escape; a surrogate
    comes as an escape, as UTF-8-style bytes starting 0xED (json reads bytes with
    "surrogatepass") or, in text, as itself; UTF-16/32 bodies contain zero bytes. A body with
    none of these (most callbacks) needs no walk over its strings."""
    if isinstance(raw, str):
        return "\x00" in raw or _escaped_u(raw, "\\", "u") or not _encodes(raw)
    return b"\xed" in raw or b"\x00" in raw or _escaped_u(raw, b"\\", b"u")


def _escaped_u(raw, backslash, u) -> bool:
    """`backslash + "u" in raw`, found by the backslashes (a memchr each): CPython searches a
    two-character needle a byte at a time, 55 us in a 21 KB callback against 1 us this way.
    Bounded: past 64 backslashes the plain search finishes the job."""
    at = raw.find(backslash)
    for _ in range(64):
        if at == -1:
            return False
        if raw[at + 1 : at + 2] == u:
            return True
        at = raw.find(backslash, at + 1)
    return backslash + u in raw[at:]


def _openers_over(raw, limit: int) -> bool:
    """Whether the text holds more than `limit` openers (`[`, `{`), an upper bound of its nesting
    depth, so most bodies need no walk. Found one by one (a memchr each) and only up to `limit`:
    counting them all read a 21 KB callback byte by byte twice (37 us, against 15)."""
    found = 0
    for opener in ("[", "{") if isinstance(raw, str) else (b"[", b"{"):
        at = raw.find(opener)
        while at != -1:
            found += 1
            if found > limit:
                return True
            at = raw.find(opener, at + 1)
    return False


def _depth_over(value, levels_left: int) -> bool:
    """Whether containers nest deeper than `levels_left` (recursive: at most MAX_DEPTH frames,
    and three times faster than a stack of tuples on a callback with 100 failed tests)."""
    if levels_left <= 0:
        return True
    for child in value.values() if type(value) is dict else value:
        kind = type(child)
        if (kind is dict or kind is list) and _depth_over(child, levels_left - 1):
            return True
    return False


def encoded(value, fallback) -> bytes:
    """`value` as JSON bytes, by orjson where it writes what `json` would, else `fallback(value)`
    (bytes): json's way, in the caller's spelling. orjson is ~10x faster on a stored callback
    body or a dispatch's webhook payload (docs/performance.md)."""
    try:
        return orjson.dumps(value, option=AS_JSON)
    except orjson.JSONEncodeError:
        return fallback(value)


AS_JSON = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
"""orjson writes these types where json refuses them or writes them otherwise (a datetime, a
dataclass, a subclass of str or dict); passed through to no `default`, they raise, and the
fallback writes (or refuses) them as json does. So does an integer past 64 bits or a lone
surrogate, which orjson refuses by itself. Differences that stay, none of which a body read by
`loads` can hold: orjson writes NaN and ±Infinity as null (json: NaN, Infinity; `loads` refuses
them), an enum member and a UUID as their values (json refuses them); and it spells some floats
otherwise (1e-7, json 1e-07: the same number)."""


def _parsed(raw, what: str):
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass  # read again below, for json's verdict and its words

    def refuse_constant(name: str):
        raise NotStorable(f"{what} is not valid JSON: {name} is not a JSON number")

    try:
        return json.loads(raw, parse_constant=refuse_constant, parse_float=_finite_float)
    except _Unbounded as exc:
        place = "" if what == "body" else f"{what}: "
        raise NotStorable(
            f"{place}'{_unbounded_path(raw)}' is {str(exc)[:40]}, a number beyond what JSON can store"
        ) from None


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Unbounded(text)
    return value


def _unbounded_path(raw) -> str:
    """Where the first such number sits (a second parse, only on this error path)."""
    marker = object()
    found = [("", json.loads(raw, parse_float=lambda t: marker if not math.isfinite(float(t)) else 0.0))]
    while found:
        path, item = found.pop()
        if item is marker:
            return path or "body"
        if isinstance(item, dict):
            found.extend((f"{path}.{k}".lstrip("."), v) for k, v in item.items())
        elif isinstance(item, list):
            found.extend((f"{path}[{i}]", v) for i, v in enumerate(item))
    return "body"
