"""The one matching rule for known issues, expectations and subscriptions' test patterns.

A pattern is an fnmatch-style glob (`*`, `?`, `[…]`) over a normalised test identity
(relay.policy.testids): it matches the full id `module.Class.method` or the module-less key
`Class.method`, so `TestCommon.test_addmm*` matches in whatever module. A failing job that
reported no test is matched by its label, `workflow / job`. Never a user regex: globs are
translated by fnmatch into patterns without backtracking traps, and their length and number are
capped, and they run on RE2 (relay.inputs.linear). A message matcher is a plain substring test over the first MESSAGE_SCAN characters."""

import fnmatch
import re
from dataclasses import dataclass
from functools import lru_cache

from relay.inputs.linear import PatternError, linear
from relay.policy.reasons import reason_of
from relay.policy.testids import TestId

from ..models.triage import MAX_CAUSE_CHARS, MAX_MESSAGE_CHARS, MAX_PATTERN_CHARS, MAX_PATTERNS

MESSAGE_SCAN = 4000
_ALLOWED = re.compile(r"^[\w.\-\[\]*?/ ,:()=+!#@]+$")


def pattern_check(pattern: str) -> str:
    """The pattern, stripped, or PatternError saying what is wrong with it."""
    pattern = (pattern or "").strip()
    if not pattern:
        raise PatternError("a test pattern may not be empty")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise PatternError(f"a test pattern is at most {MAX_PATTERN_CHARS} characters")
    if not _ALLOWED.match(pattern):
        raise PatternError(f"{pattern!r}: only letters, digits and . _ - [ ] * ? / , : ( ) = + ! # @ and spaces")
    if pattern.strip("*?") == "":
        raise PatternError(f"{pattern!r} would match every test; name at least part of one")
    return pattern


def patterns_check(patterns) -> list[str]:
    if not isinstance(patterns, list | tuple):
        raise PatternError("test patterns must be a list of strings")
    if len(patterns) > MAX_PATTERNS:
        raise PatternError(f"at most {MAX_PATTERNS} test patterns")
    return list(dict.fromkeys(pattern_check(str(p)) for p in patterns))


def cause_check(text: str) -> str:
    text = " ".join((text or "").split())
    if len(text) > MAX_CAUSE_CHARS:
        raise PatternError(f"a cause is at most {MAX_CAUSE_CHARS} characters")
    return text


def message_check(text: str) -> str:
    text = (text or "").strip()
    if len(text) > MAX_MESSAGE_CHARS:
        raise PatternError(f"a message substring is at most {MAX_MESSAGE_CHARS} characters")
    return text


@lru_cache(maxsize=4096)
def _compiled(pattern: str):
    """fnmatch's own translation, run on RE2 (relay.inputs.linear): its atomic groups `(?>.*?x)` keep
    Python's engine from backtracking, and RE2, which never backtracks, reads them as plain
    groups with the same matches."""
    translated = fnmatch.translate(pattern)
    return linear(translated.removesuffix(r"\Z").replace("(?>", "(?:"))


def glob_matches(pattern: str, subject: str) -> bool:
    return _compiled(pattern).fullmatch(subject) is not None


def id_matches(pattern: str, tid: TestId | str) -> bool:
    """A glob against a test identity (full id or module-less key), or against a job label."""
    if isinstance(tid, str):
        return glob_matches(pattern, tid)
    return glob_matches(pattern, tid.full) or (bool(tid.module) and glob_matches(pattern, tid.key))


@dataclass(frozen=True)
class Failure:
    """One failure as the matchers see it: a test (its identity and message) or a failing job
    that reported no test (its label as `subject`, no message)."""

    project_id: int
    subject: TestId | str
    message: str = ""

    @property
    def text(self) -> str:
        return self.subject.full if isinstance(self.subject, TestId) else self.subject


@lru_cache(maxsize=4096)
def rule_of(message: str) -> str:
    """A failure's cause as a known issue names it; a page asks it of one message per issue."""
    return reason_of(message).rule


def failure_matches(patterns, message_contains: str, failure: Failure, cause: str = "") -> bool:
    """Every matcher that is given must hold; with none nothing matches. A cause is the
    failure's reason (relay.policy.reasons), read from its message as the sweep reads it."""
    if not patterns and not message_contains and not cause:
        return False
    if patterns and not any(id_matches(p, failure.subject) for p in patterns):
        return False
    if cause and rule_of(failure.message or "") != cause:
        return False
    return not message_contains or message_contains in (failure.message or "")[:MESSAGE_SCAN]
