"""Each backend's published expectations: the tests it expects to fail and the ones it knows are
flaky, in the format of the Linux DRM CI's per-driver lists (one `pattern,Kind` per line).

**Uploaded, not read from the backend's repo.** The backend's CI uploads the file through the
API (PUT /api/v1/projects/<owner>/<repo>/expectations, `write:projects` token): the relay's App
has no read access to backends' repositories (and Buildkite or GitLab backends keep their
config elsewhere); a pinned path would have to be polled and would lag the run that changed it;
an upload is atomic (the whole list replaced or nothing), says who sent it and when, and can be
made by the same job that fixed or broke the tests.

Format::

    # comment lines and blank lines are ignored
    test_ops.TestCommon.test_addmm*,Fail
    TestNNDeviceType.test_conv2d_backward,Flake   # a reason after '#'

Kinds: Fail (also Crash, Timeout), Flake. Patterns are relay.triage.matching globs over
normalised test ids (device suffixes already stripped: `test_conv2d`, not `test_conv2d_xpu`).

An expected failure that passes on N consecutive trunk commits (CRCR_EXPECTATION_PASSES) is
flagged *unexpectedly passing*, so the list gets pruned."""

from django.db import transaction
from django.utils import timezone

from ..models_triage import Expectation
from .matching import PatternError, pattern_check

MAX_BYTES = 256 * 1024
MAX_LINES = 5000
KINDS = {
    "fail": Expectation.Kind.FAIL,
    "crash": Expectation.Kind.FAIL,
    "timeout": Expectation.Kind.FAIL,
    "flake": Expectation.Kind.FLAKY,
}
PASS, FAIL, UNKNOWN = "pass", "fail", "unknown"


class ExpectationsError(ValueError):
    pass


def expectations_parse(text: str) -> list[tuple[str, str, str, int]]:
    """(pattern, kind, reason, line number) per entry; ExpectationsError names the first bad line."""
    if len(text.encode()) > MAX_BYTES:
        raise ExpectationsError(f"the file is larger than {MAX_BYTES // 1024} KiB")
    entries, seen = [], set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line, _, reason = raw.partition("#")
        if not line.strip():
            continue
        entry = _entry(line, reason.strip(), number)
        if entry[0] in seen:
            raise ExpectationsError(f"line {number}: {entry[0]!r} is listed twice")
        seen.add(entry[0])
        entries.append(entry)
    if len(entries) > MAX_LINES:
        raise ExpectationsError(f"at most {MAX_LINES} entries")
    return entries


def _entry(line: str, reason: str, number: int) -> tuple[str, str, str, int]:
    pattern, comma, kind = line.strip().rpartition(",")
    if not comma:
        raise ExpectationsError(f"line {number}: expected `pattern,Fail` or `pattern,Flake`")
    kind_value = KINDS.get(kind.strip().lower())
    if kind_value is None:
        raise ExpectationsError(f"line {number}: unknown kind {kind.strip()!r} (Fail, Crash, Timeout or Flake)")
    try:
        return pattern_check(pattern), kind_value, reason[:300], number
    except PatternError as exc:
        raise ExpectationsError(f"line {number}: {exc}") from exc


@transaction.atomic
def expectations_replace(project, text: str, by: str) -> list[Expectation]:
    """Replace the backend's whole list with the file's entries (all or nothing)."""
    entries = expectations_parse(text)
    now = timezone.now()
    Expectation.objects.filter(project=project).delete()
    rows = [
        Expectation(project=project, pattern=p, kind=k, reason=r, line=n, uploaded_at=now, uploaded_by=by[:200])
        for p, k, r, n in entries
    ]
    return Expectation.objects.bulk_create(rows)


def expectations_text(project) -> str:
    """The list back in the upload format."""
    names = {Expectation.Kind.FAIL: "Fail", Expectation.Kind.FLAKY: "Flake"}
    lines = [
        f"{e.pattern},{names[e.kind]}" + (f"  # {e.reason}" if e.reason else "")
        for e in project.expectations.order_by("line", "id")
    ]
    return "\n".join(lines) + ("\n" if lines else "")


def passing_streak(states_newest_first: list[str]) -> int:
    """How many decided trunk results in a row, newest first, passed. Commits without a decided
    result neither count nor break the streak."""
    streak = 0
    for state in states_newest_first:
        if state == FAIL:
            break
        streak += state == PASS
    return streak
