"""relay.inputs.jsonin's two scans of the raw text before a body is walked — whether a `\\u` escape, a
0xED byte or a NUL could hide unstorable text, and whether the text holds more openers than the
depth limit — found by memchr instead of CPython's byte-by-byte search (docs/performance.md,
issue 55): they must answer exactly what the plain search and count answered, for bytes, text and
bytearrays, near the 64-backslash bound too."""

import random

import pytest

from relay.inputs import jsonin


def _plain_may_hide(raw) -> bool:
    if isinstance(raw, str):
        return "\\u" in raw or "\x00" in raw or not jsonin._encodes(raw)
    return b"\\u" in raw or b"\xed" in raw or b"\x00" in raw


def _plain_openers(raw) -> int:
    return raw.count("[" if isinstance(raw, str) else b"[") + raw.count("{" if isinstance(raw, str) else b"{")


def _texts():
    rng = random.Random(55)
    alphabet = b'\\u{[ab"\xed'
    for n in range(4000):
        raw = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 400 if n % 10 == 0 else 12)))
        yield raw
        yield bytearray(raw)
        yield raw.replace(b"\xed", b"e").decode("ascii")
    for backslashes in (63, 64, 65, 200):  # the bound: past 64 backslashes the plain search finishes
        yield b"\\x" * backslashes + b"\\u0000"
        yield "\\x" * backslashes + "\\u0000"
        yield b"\\x" * backslashes


@pytest.mark.parametrize("limit", [0, 1, 3, 64])
def test_the_scans_answer_what_the_plain_search_and_count_answered(limit):
    for raw in _texts():
        assert jsonin._may_hide_unstorable_text(raw) == _plain_may_hide(raw), raw
        assert jsonin._openers_over(raw, limit) == (_plain_openers(raw) > limit), (raw, limit)


def test_a_body_deeper_than_the_limit_is_still_refused_and_one_at_it_read():
    assert jsonin.checked(b"[" * 64 + b"]" * 64) is not None
    with pytest.raises(jsonin.NotStorable, match="nested deeper than 64"):
        jsonin.checked(b"[" * 65 + b"]" * 65)
    with pytest.raises(jsonin.NotStorable, match="NUL"):
        jsonin.checked(b'{"a": "' + b"\\\\x" * 70 + b'\\u0000"}')
