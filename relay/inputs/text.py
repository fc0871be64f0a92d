"""Characters that change how text reads without being seen: C0/C1 controls (ESC starts a
terminal sequence, a newline can end a line or a table row), U+2028/2029, the bidirectional
embeddings, overrides, isolates and marks (`test\u202egnp.exe` reads as `testexe.png`), and the
invisible ones: zero-width spaces and joiners, the word joiner and invisible operators, the soft
hyphen, the byte order mark, fillers that draw as blanks, tag characters (which can carry a hidden
message) and the other format characters Unicode draws as nothing (`test_add\u200b` looks like
`test_add`). Nothing we write or show needs them. One definition for what we send upstream
(relay.github.markdown) and what our pages show (hud.middleware)."""

import re

BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
INVISIBLE = (
    "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200d\u2060-\u2065\u206a-\u206f\u3164"
    "\ufeff\uffa0\ufff9-\ufffb\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e007f\U000e0100-\U000e01ef"
)
"""Every format character (category Cf) but the drawn ones (Arabic number signs), fillers, and
the variation selectors past U+FE0F (emoji keep their own, U+FE00–FE0F)."""
CONTROLS = rf"\x00-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}{INVISIBLE}"
"""Every such character, as the inside of a regex character class."""
CONTROLS_BUT_LAYOUT = rf"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}{INVISIBLE}"
"""The same without tab, newline and carriage return, which a document's own layout uses."""

_RUNS = re.compile(f"[{CONTROLS}]+")
_ONE = re.compile(f"[{CONTROLS}]")


def escaped(text) -> str:
    """The one rule for what a stored name (a test's identity) may hold: none of these characters;
    each is written as its Python escape (`\\n`, `\\x1b`, `\\u202e`), as pytest writes them in the
    ids it makes, so nothing is lost and every route and link takes the name."""
    text = str(text or "")
    return _ONE.sub(_escape, text) if _ONE.search(text) else text


def holds_controls(text) -> bool:
    return bool(_ONE.search(str(text or "")))


def _escape(match) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def plain_line(text) -> str:
    """One line of plain text: every run of such characters becomes a single space."""
    return _RUNS.sub(" ", str(text or "")).strip()


def visible(char: str) -> str:
    """How a page shows one such character: its code point, e.g. ⟨U+202E⟩."""
    return f"⟨U+{ord(char):04X}⟩"
