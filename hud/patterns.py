"""User-supplied name patterns, matched in linear time.

A regular expression from a query string runs on RE2 (relay.inputs.linear): no backtracking, so no
pattern can take more than time proportional to the text it scans, and a memory cap bounds what
compiling it may build. Backreferences and lookarounds, which need backtracking, are refused as
invalid."""

from relay.inputs.linear import PatternError, linear

MAX_PATTERN_CHARS = 200


class FilterError(ValueError):
    """A filter a page or its API does not take, or a value it cannot read: 400 with this text."""


def pattern_matcher(pattern: str):
    """A predicate `text -> bool` searching for `pattern` (case-insensitive), or PatternError."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"a pattern may be at most {MAX_PATTERN_CHARS} characters")
    compiled = linear(pattern, case_sensitive=False)
    return lambda text: compiled.search(text) is not None
