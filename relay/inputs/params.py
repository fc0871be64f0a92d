"""How every number in a URL is read: ASCII digits only, bounded, one way for every page.

`str.isdigit()` accepts `²` and `١` (which `int()` refuses or reads as another number), and `int()`
accepts spaces, signs, underscores and other scripts' digits. A query parameter or path part is a
number here only if it is 1–`MAX_DIGITS` ASCII digits; anything else is "not a number", which each
page turns into its own convention (a 400, or the parameter ignored)."""

import re
from datetime import UTC

from django.utils.dateparse import parse_datetime

MAX_DIGITS = 18  # fits a signed 64-bit column
_DIGITS = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}", re.ASCII)


def int_param(value, default=None, low: int | None = None, high: int | None = None):
    """The number `value` spells in ASCII digits, within [low, high], else `default`."""
    if not isinstance(value, str) or not _DIGITS.fullmatch(value):
        return default
    number = int(value)
    if (low is not None and number < low) or (high is not None and number > high):
        return default
    return number


def int_list_param(value, limit: int = 200, high: int | None = None) -> set[int]:
    """`3,7,12` → {3, 7, 12}: the parts that are numbers (at most `limit` read); the rest ignored."""
    parts = (value or "").split(",")[:limit] if isinstance(value, str) else []
    numbers = (int_param(part.strip(), high=high) for part in parts)
    return {n for n in numbers if n is not None}


def aware_datetime(value: str):
    """An ISO-8601 timestamp with a time zone, in UTC; None when it is not one, names an
    impossible date (month 13) or leaves the calendar once in UTC (`0001-01-01T00:00+05:00`,
    `9999-12-31T23:00-05:00`), which would otherwise fail later, when it is stored or shown.
    ASCII only: Django's parser reads `١` and `𝟗` as digits."""
    if not isinstance(value, str) or not value.isascii():
        return None
    try:
        parsed = parse_datetime(value)
        return parsed.astimezone(UTC) if parsed is not None and parsed.tzinfo is not None else None
    except (ValueError, OverflowError):
        return None
