"""JSON from outside (webhooks, callbacks) read so that whatever parses can be stored.

Python's `json` reads `NaN`, `Infinity` and numbers past a double's range (`1e999`, read as
infinity); no database's JSON column accepts them, so the row would fail only when saved, after
every other check passed — a 500. Here they are refused at parse time, naming where they sit.

orjson reads first: it refuses all of those by itself and reads a 21 KB callback in under half
the time (docs/performance.md, "Where each millisecond goes"). Whatever it refuses is read again
by `json`, so an accepted body, a refused one and every error message are exactly what `json`
alone gives (json also reads UTF-16/32 and integers of any size, which orjson refuses). One
difference is kept: orjson reads an integer too large for 64 bits as the nearest double, where
`json` keeps every digit; no field of a webhook or a callback holds such a number."""

import json
import math

import orjson


class NotStorable(ValueError):
    """A 400: the message names the value's place (`workflow.environment.x`)."""


class _Unbounded(Exception):
    pass


def loads(raw):
    """json.loads, refusing NaN/±Infinity and numbers no double holds."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass  # read again below, for json's verdict and its words
    try:
        return json.loads(raw, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _Unbounded as exc:
        raise NotStorable(f"'{_unbounded_path(raw)}' is {str(exc)[:40]}, a number beyond what JSON can store") from None


def _refuse_constant(name: str):
    raise NotStorable(f"body is not valid JSON: {name} is not a JSON number")


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
