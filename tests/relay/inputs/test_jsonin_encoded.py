"""relay.inputs.jsonin.encoded: one way to write JSON fast for both writers (a GitHub request body,
a stored JSON column), by orjson exactly where it writes what json would, else by the caller's json."""

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from relay.github.client import json_bytes
from relay.inputs import jsonin


def _by_json(value) -> bytes:
    return b"json:" + json.dumps(value, default=str).encode()


def test_plain_json_is_written_by_orjson_as_json_writes_it_compactly():
    value = {"a": [1, 2.5, None, True], "text": "naïve ☃", "neg": -(2**63)}
    written = jsonin.encoded(value, _by_json)
    assert written == json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


class _Name(str):
    pass


@dataclass
class _Point:
    x: int


@pytest.mark.parametrize(
    "value",
    [
        {"at": datetime(2026, 1, 1, tzinfo=UTC)},  # orjson would write it; json refuses it
        {"name": _Name("x")},  # a subclass of str
        {"point": _Point(1)},  # a dataclass
        {"big": 2**70},  # past 64 bits: orjson refuses it, json writes every digit
    ],
)
def test_what_orjson_would_write_otherwise_goes_to_the_callers_json(value):
    assert jsonin.encoded(value, _by_json).startswith(b"json:")


def test_a_github_request_body_is_compact_utf8_either_way():
    assert json_bytes({"t": "☃", "n": 2**70}) == '{"t":"☃","n":1180591620717411303424}'.encode()
    assert json_bytes({"t": "☃", "n": 1}) == '{"t":"☃","n":1}'.encode()
