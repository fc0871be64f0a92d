"""Characters that change how text reads without being seen: C0/C1 controls (ESC starts a
terminal sequence, a newline can end a line or a table row), U+2028/2029, and the bidirectional
embeddings, overrides, isolates and marks (`test\u202egnp.exe` reads as `testexe.png`). Nothing we
write or show needs them. One definition for what we send upstream (relay.checks.markdown) and
what our pages show (hud.middleware)."""

import re

BIDI_CONTROLS = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
CONTROLS = rf"\x00-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}"
"""Every such character, as the inside of a regex character class."""
CONTROLS_BUT_LAYOUT = rf"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}"
"""The same without tab, newline and carriage return, which a document's own layout uses."""

_RUNS = re.compile(f"[{CONTROLS}]+")


def plain_line(text) -> str:
    """One line of plain text: every run of such characters becomes a single space."""
    return _RUNS.sub(" ", str(text or "")).strip()


def visible(char: str) -> str:
    """How a page shows one such character: its code point, e.g. ⟨U+202E⟩."""
    return f"⟨U+{ord(char):04X}⟩"
