"""The one way text from downstream (job and workflow names, run ids, failed tests, messages)
enters the Markdown the relay writes upstream (check-run summaries, oncall comments, the gate).

Each such string becomes an inline code span, inside which GitHub renders nothing: no @-mention,
no team ping, no link or autolink, no image, no HTML, no emphasis. Control characters and line
breaks become spaces (a newline could end a table row or the span), the fence is longer than any
run of backticks inside, and in table cells `|` is escaped (GitHub splits cells before it reads
code spans and drops the backslash again). Links are only ever ours or a reported run URL, behind
fixed link text and percent-encoded so they cannot break out."""

import re
from urllib.parse import quote, urlsplit

_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")
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
