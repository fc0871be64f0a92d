"""User-supplied name patterns, matched in linear time.

A regular expression from a query string runs on RE2 (relay.inputs.linear): no backtracking, so no
pattern can take more than time proportional to the text it scans, and a memory cap bounds what
compiling it may build. Backreferences and lookarounds, which need backtracking, are refused as
invalid."""

from relay.inputs.linear import PatternError as LinearPatternError
from relay.inputs.linear import linear

MAX_PATTERN_CHARS = 200


class PatternError(ValueError):
    """The pattern is not one we run; the message says why, for the page to show."""


def pattern_matcher(pattern: str):
    """A predicate `text -> bool` searching for `pattern` (case-insensitive), or PatternError."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"a pattern may be at most {MAX_PATTERN_CHARS} characters")
    try:
        compiled = linear(pattern, case_sensitive=False)
    except LinearPatternError as exc:
        raise PatternError(str(exc)) from exc
    return lambda text: compiled.search(text) is not None
