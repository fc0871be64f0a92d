"""Patterns run on text from outside (logs, test and job names, titles, allowlists, webhooks,
callbacks), matched in linear time.

Python's `re` backtracks: a pattern with two ways to match the same text (`(?: [(].*?[)])*\\s*$`
over a line of bracketed groups) takes time exponential in the line's length, and any printed
test output in a job log is such a line. RE2 (google-re2) never backtracks, so every match costs
time proportional to the text it scans, whatever the pattern; a memory cap bounds what compiling
one may build. `tests/security/test_linear_patterns.py` keeps every pattern of the product here.

RE2's `\\d`, `\\s` and `\\w` are ASCII (Python's read `١` as a digit); `\\pL`/`\\pN` name
Unicode letters and numbers where a name may hold them. Backreferences and lookaround do not
exist: they need backtracking."""

import re2

MAX_PROGRAM_BYTES = 1 << 20


class PatternError(ValueError):
    """A pattern we will not run: RE2 refuses it, or it breaks the rule of the matcher it was
    given to (relay.triage.matching, hud.patterns); the message says why."""


class Linear(re2._Regexp):
    """An RE2 pattern that reads its group names once: the binding looks them up again on every
    `match["name"]`, which cost more than the match itself on a log's lines."""

    __slots__ = ("_names",)

    def __init__(self, pattern: str, options: re2.Options):
        super().__init__(pattern, options)
        self._names = super().groupindex

    @property
    def groupindex(self) -> dict:
        return self._names

    def _match(self, anchor, text, pos=None, endpos=None):
        """Every method matches through here: text RE2 cannot take (a lone surrogate, which
        UTF-8 cannot encode) is matched with U+FFFD in its place, at the same positions."""
        return super()._match(anchor, _encodable(text), pos, endpos)


def _encodable(text):
    if not isinstance(text, str) or text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= char <= "\udfff" else char for char in text)
    return text


def linear(pattern: str, *, case_sensitive: bool = True) -> Linear:
    """`pattern` compiled by RE2: `match`, `search`, `fullmatch`, `sub`, `split`, `findall` as
    in `re`, in linear time."""
    options = re2.Options()
    options.case_sensitive = case_sensitive
    options.max_mem = MAX_PROGRAM_BYTES
    options.log_errors = False
    try:
        return Linear(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(reason) from exc


def is_linear(pattern) -> bool:
    return isinstance(pattern, re2._Regexp)
