"""The hostile values the sweeps share (issue 45): every digit Unicode has that is not ASCII, the
invisible characters, timestamps that leave the calendar once in UTC, JSON text that would slip
past the body's checks, and nesting at and past the one depth limit."""

import sys
import unicodedata

from relay.inputs.jsonin import MAX_DEPTH


def _digits(category: str) -> list[str]:
    return [
        chr(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) == category and unicodedata.digit(chr(c), None) is not None and c > 127
    ]


DIGITS_ND = _digits("Nd")
"""Every decimal digit of every script (category Nd): `int()` reads them all."""
DIGITS_NO = _digits("No")
"""Every other character with a digit value (category No: ², ₁, ①, ⑴, ⒈, 🄂 …): `isdigit()` is true."""
FEW_DIGITS = ["١", "३", "１", "𝟏", "¹", "①", "⑴", "⒈", "₁", "🄂"]
"""Nd of four scripts and No of six kinds: what a sweep over every page and parameter can afford."""


def spelled(number: int, one: str) -> str:
    """`number` in the script of the digit `one` (Nd digits run 0–9 in order), or `one` repeated."""
    if unicodedata.category(one) == "Nd":
        zero = ord(one) - unicodedata.digit(one)
        return "".join(chr(zero + int(d)) for d in str(number))
    return one * len(str(number))


INVISIBLE = [
    "\u200b",  # zero width space
    "\u200c",  # zero width non-joiner
    "\u200d",  # zero width joiner
    "\u2060",  # word joiner
    "\u2062",  # invisible times
    "\u00ad",  # soft hyphen
    "\ufeff",  # byte order mark
    "\u180e",  # Mongolian vowel separator
    "\u3164",  # Hangul filler
    "\u034f",  # combining grapheme joiner
    "\ufff9",  # interlinear annotation anchor
    "\U000e0061",  # tag latin small letter a
    "\U000e0100",  # variation selector 17
]

OUT_OF_CALENDAR = [
    "9999-12-31T23:00:00-05:00",
    "9999-12-31T23:59:59-00:01",
    "0001-01-01T00:00:00+05:00",
    "0001-01-01T00:30:00+01:00",
    "9999-12-31T23:00:00-23:59",
]
"""Valid ISO 8601 text that names no instant a database or a page can hold once in UTC."""

JSON_TEXTS = {
    "lone surrogate": '{"x": "\\ud800"}',
    "NUL": '{"x": "a\\u0000b"}',
    "NaN": '{"x": NaN}',
    "a number no double holds": '{"x": 1e999}',
    "deep past Python's recursion limit": "[" * 5000 + "]" * 5000,
    "one past the depth limit": "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1),
    "not JSON": "{",
}
"""JSON text a field may carry (the action sends failed_tests and a verdict as strings): each is
what the body itself is refused for, once the field's own depth (2) is counted."""


def nested(depth: int) -> bytes:
    """JSON `depth` levels deep: that many lists around a number."""
    return b"[" * depth + b"1" + b"]" * depth


CONTROL_CHARS = ["\n", "\r", "\t", "\x1b", "\x7f", "\x85", "\u2028", "\u202e", "\u2066", "\u200b", "\ufeff"]
"""A character of each kind relay.inputs.text.CONTROLS holds (C0 with the layout ones, DEL, C1, the line
separator, bidi override and isolate, invisible): what a stored name may not hold."""
