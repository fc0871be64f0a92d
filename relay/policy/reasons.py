"""A failure's reason, read from its message: pure, no database.

The reason is the exception type and the first meaningful line of the message with what varies
from one test, backend or run to the next written as a placeholder (numbers, addresses, hex ids,
paths, shapes, dtypes, device words), so the same bug on 40 tests and three backends reads as one
line. PyTorch's own words for an operator a backend lacks become a reason of their own that names
the operator (`MISSING_OPERATOR`).

Every pattern runs in RE2 (relay.inputs.linear) over a bounded input: the message and stack tail the
callback stored are already capped (relay/callbacks/body.py), and this reads at most `MAX_INPUT`
characters of each. `VERSION` names the algorithm: change anything here that moves a failure to
another cluster and bump it; the sweep (relay/teststore/causes.py) then clusters every stored
failure again and keeps the old clusters until it is done."""

import hashlib
from dataclasses import dataclass
from functools import lru_cache

from relay.inputs.linear import linear
from relay.policy.testids import DEVICES

VERSION = 1
MAX_INPUT = 2000
MAX_LINE = 300
REASON = "reason"
MISSING_OPERATOR = "missing_operator"

_OP = r"(?P<op>[A-Za-z_][\w]*::[\w.]+)"
_MISSING = [
    # NotImplementedError from the dispatcher: no kernel for the key (c10/core/dispatch).
    linear(r"Could not run '" + _OP + r"' with arguments from the '(?P<dev>[\w]+)' backend"),
    # MPS and the out-of-tree backends that copy its wording (no fallback enabled).
    linear(r"The operator '" + _OP + r"' is not currently implemented for the (?P<dev>[\w]+) device"),
    # The CPU fallback's warning (MPS, NPU, PrivateUse1 backends), reported as an error.
    linear(r"The operator '" + _OP + r"' is not currently supported on the (?P<dev>[\w]*) ?backend and will fall back"),
    # torch-xpu-ops' fallback warning with PYTORCH_DEBUG_XPU_FALLBACK=1.
    linear(r"The operator '" + _OP + r"' on the (?P<dev>[\w]+) backend is falling back to run on the CPU"),
]
_TYPED = linear(
    r"^(?:E\s+)?(?P<type>[A-Za-z_][\w.]{0,120}(?:Error|Exception|Warning|Exit|Interrupt|Failure)):\s*(?P<text>.*)$"
)
_SETUP = linear(r"^failed on (?:setup|teardown) with \"(?P<inner>.*)\"$")
_NOISE = linear(r"^(?:\s*|[-=_~^*]{3,}.*|Traceback \(most recent call last\):|To execute this test.*)$")
_AMBIGUOUS = {"ve", "lazy", "meta", "metal"}
"""Device types that are also English words in messages: left as they are."""
OUT_OF_TREE = ("npu", "rbln", "spyre", "gaudi", "tpu", "dml", "musa", "mlu", "privateuseone")
"""Out-of-tree backends' device names (torch knows them only as privateuse1); a backend's own
registered device_type is read as a device word too (`reason_of(…, device_word=)`)."""
_DEVICE_WORDS = "|".join(sorted(d for d in {*DEVICES, *OUT_OF_TREE} if d not in _AMBIGUOUS))
_KEY_PREFIX = "(?:autograd|sparse|quantized|nestedtensor|sparsecsr)?"
_DTYPES = (
    r"float(?:8_e4m3fnuz|8_e4m3fn|8_e5m2fnuz|8_e5m2|16|32|64)?|bfloat16|half|double|complex(?:32|64|128)|"
    r"u?int(?:1|2|4|8|16|32|64)|bool|long|short|cfloat|cdouble|quint8|qint8|qint32"
)


def _hex_id(found) -> str:
    """A run of hex digits is an id only when it mixes digits and letters: 'added' and 'cafe'
    are words, 1234567 is a number (written as one below)."""
    word = found.group(0)
    return "<hex>" if any(c.isdigit() for c in word) and not word.isdigit() else word


_NORMALISE = [
    (linear(r"0x[0-9a-fA-F]+"), "<addr>"),
    (linear(r"\b[0-9a-fA-F]{7,64}\b"), _hex_id),
    (linear(r"\b(?:https?|file|s3)://[^\s()<>\[\]'\"]+"), "<url>"),
    (linear(r"(?:\b[A-Za-z]:)?(?:[\w.~-]*/)+[\w.-]+(?::\d+)?"), "<path>"),
    (linear(r"torch\.Size\(\[[\d, ]*\]\)"), "<shape>"),
    (linear(r"[\[(]\s*\d+(?:\s*,\s*\d+)+\s*,?\s*[\])]|[\[(]\s*\d+\s*,\s*[\])]"), "<shape>"),
    (linear(r"\b(?:torch\.)?(?:" + _DTYPES + r")\b"), "<dtype>"),
    (linear(r"(?i)\b" + _KEY_PREFIX + r"(?:" + _DEVICE_WORDS + r")(?::\d+)?\b"), "<device>"),
    (linear(r"\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b"), "<n>"),
    (linear(r"\s+"), " "),
]


@dataclass(frozen=True)
class Reason:
    kind: str
    exception: str
    signature: str
    """The normalised line (for a missing operator, the operator itself)."""
    operator: str = ""
    device: str = ""
    """For a missing operator: the dispatch key or device the message named, as written."""
    example: str = ""
    """The line as it was read, before normalising: what a person recognises."""

    @property
    def rule(self) -> str:
        return rule_text(self.exception, self.signature)

    @property
    def digest(self) -> str:
        """The cluster's key under this version: the same reason, the same digest."""
        key = "\x1f".join((str(VERSION), self.kind, self.exception, self.signature))
        return hashlib.sha1(key.encode("utf-8", errors="replace"), usedforsecurity=False).hexdigest()


def rule_text(exception: str, signature: str) -> str:
    """How a cause is named in a known issue's rule (and shown): `Type: normalised line`. A rule
    names the reason, not one version's cluster, so it outlives a re-clustering that keeps it."""
    return f"{exception}: {signature}" if exception else signature


def reason_of(message: str, stacktrace: str = "", device_word: str = "") -> Reason:
    """The reason of one failure from its stored message and (the tail of) its stack trace;
    `device_word`: the backend's own device type, written as a device word as well."""
    message, stacktrace = (message or "")[:MAX_INPUT], (stacktrace or "")[-MAX_INPUT:]
    missing = missing_operator(message) or missing_operator(stacktrace)
    if missing:
        return missing
    exception, line = _first_line(message)
    if not exception:
        exception, found = _typed_in(stacktrace, line)
        line = line or found
    return Reason(REASON, exception, normalise(line, device_word) or "(no message)", example=line[:MAX_LINE])


def missing_operator(text: str) -> Reason | None:
    for pattern in _MISSING:
        found = pattern.search(text)
        if found:
            op = found["op"][:200]
            example = text[found.start() : found.end()][:MAX_LINE]
            return Reason(
                MISSING_OPERATOR, "NotImplementedError", op, operator=op, device=found["dev"], example=example
            )
    return None


def _first_line(message: str) -> tuple[str, str]:
    """(exception type, its text) of the message's first meaningful line; pytest's
    'failed on setup with "…"' is read for the error inside it."""
    for raw in message.splitlines():
        line = raw.strip()
        if _NOISE.fullmatch(line):
            continue
        setup = _SETUP.match(line)
        line = setup["inner"].strip() if setup else line
        typed = _TYPED.match(line)
        return (typed["type"], typed["text"].strip()) if typed else ("", line)
    return "", ""


def _typed_in(stacktrace: str, line: str) -> tuple[str, str]:
    """A message without its type (unittest writes 'Tensor-likes are not close!'): the last
    'SomeError: …' line of the stack names it, preferring one that carries the message."""
    best = ("", "")
    for raw in stacktrace.splitlines():
        typed = _TYPED.match(raw.strip())
        if typed:
            best = (typed["type"], typed["text"].strip())
            if line and best[1].startswith(line[:60]):
                return best[0], line
    return best[0], line or best[1]


def normalise(line: str, device_word: str = "") -> str:
    """The line with what varies written as placeholders, cut to `MAX_LINE`."""
    text = line[: MAX_LINE * 2]
    own = device_word.isalnum() and device_word.lower() not in _AMBIGUOUS
    for pattern, placeholder in _NORMALISE:
        text = pattern.sub(placeholder, text)
        if placeholder == "<device>" and own:
            text = _device_pattern(device_word.lower()).sub("<device>", text)
    return text.strip()[:MAX_LINE]


@lru_cache(maxsize=64)
def _device_pattern(word: str):
    return linear(r"(?i)\b" + _KEY_PREFIX + word + r"(?::\d+)?\b")
