"""User-supplied name patterns, matched in linear time.

A regular expression from a query string runs on RE2 (google-re2): no backtracking, so no pattern
can take more than time proportional to the text it scans, and a memory cap bounds what compiling
it may build. Backreferences and lookarounds, which need backtracking, are refused as invalid."""

import re2

MAX_PATTERN_CHARS = 200
MAX_PROGRAM_BYTES = 1 << 20


class PatternError(ValueError):
    """The pattern is not one we run; the message says why, for the page to show."""


def _options() -> "re2.Options":
    options = re2.Options()
    options.case_sensitive = False
    options.max_mem = MAX_PROGRAM_BYTES
    options.log_errors = False
    return options


def pattern_matcher(pattern: str):
    """A predicate `text -> bool` searching for `pattern` (case-insensitive), or PatternError."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"a pattern may be at most {MAX_PATTERN_CHARS} characters")
    try:
        compiled = re2.compile(pattern, _options())
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(reason) from exc
    return lambda text: compiled.search(text) is not None
