"""The one way text from downstream (job and workflow names, run ids, failed tests, messages)
enters the Markdown the relay writes upstream (check-run summaries, oncall comments, the gate).

Each such string becomes an inline code span, inside which GitHub renders nothing: no @-mention,
no team ping, no link or autolink, no image, no HTML, no emphasis. Control characters and line
breaks become spaces (a newline could end a table row or the span), the fence is longer than any
run of backticks inside, and in table cells `|` is escaped (GitHub splits cells before it reads
code spans and drops the backslash again). Links are only ever ours or a reported run URL, behind
fixed link text and percent-encoded so they cannot break out.

Every body we send upstream also passes `upstream_body` on its way out: single-line fields (names,
titles, external ids) lose every control, line-break and bidirectional-override character, and
Markdown bodies keep their newlines but lose the rest — so a job named `build\x1b[2J` or
`test\u202egnp.exe` reaches GitHub as plain text, whichever code path built the body."""

import re
from urllib.parse import quote, urlsplit

from relay.inputs.text import CONTROLS, CONTROLS_BUT_LAYOUT, plain_line

_CONTROL = re.compile(f"[{CONTROLS}]+")
_CONTROL_BUT_NEWLINES = re.compile(rf"[\r{CONTROLS_BUT_LAYOUT}]+")
SINGLE_LINE_FIELDS = frozenset({"name", "title", "external_id"})
_SAFE_URL_CHARS = "/:?#[]@!$&'*+,;=%-._~"


def md_code(text, limit: int = 300, *, table: bool = False) -> str:
    """`text` as an inline code span (at most `limit` characters of it); empty text stays empty."""
    flat = _CONTROL.sub(" ", str(text or "")).strip()[:limit]
    if not flat:
        return ""
    if table:
        flat = flat.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat[0] == "`" or flat[-1] == "`" else ""  # CommonMark strips one space each side
    return f"{fence}{pad}{flat}{pad}{fence}"


def upstream_body(value, key: str = ""):
    """A JSON body for GitHub with every string made safe as above (dicts and lists walked)."""
    if isinstance(value, dict):
        return {k: upstream_body(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [upstream_body(v, key) for v in value]
    if isinstance(value, str):
        return plain_line(value) if key in SINGLE_LINE_FIELDS else _CONTROL_BUT_NEWLINES.sub("", value)
    return value


def md_link(label: str, url: str) -> str:
    """[label](url) for an http(s) URL, percent-encoded so no character closes the link early;
    just the label for anything else. `label` must already be safe Markdown (ours, or md_code)."""
    parts = urlsplit(url or "")
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return label
    safe = (
        quote(_CONTROL.sub("", url), safe=_SAFE_URL_CHARS).replace("(", "%28").replace(")", "%29").replace("'", "%27")
    )
    return f"[{label}]({safe})"
