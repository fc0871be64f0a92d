"""What of a subscription's target anyone but its owner may see: one place, for every page,
log line and stored error. A webhook URL carries credentials in its userinfo
(`https://user:secret@…`), its path (Slack's `/services/T…/B…/secret`) and its query
(`?token=…`); an address names a person. Only the scheme and host (and port) are shown."""

from urllib.parse import urlsplit

HIDDEN = "…"


def target_shown(channel: str, target: str) -> str:
    """`https://hooks.example.com/…` for a webhook, `…@example.org` for an address."""
    if channel == "email":
        return HIDDEN + "@" + target.rpartition("@")[2]
    try:
        parts = urlsplit(target)
        host, port = parts.hostname or "", parts.port
    except ValueError:  # a bad port or bracketed host: show nothing rather than guess
        return HIDDEN
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{host}{f':{port}' if port else ''}/{HIDDEN}" if host else HIDDEN


def target_scrubbed(text: str, channel: str, target: str) -> str:
    """`text` (an error from a sink, an exception's message) without the target's secret parts:
    the whole target, its userinfo, path and query are replaced by what `target_shown` says."""
    if not text or not target:
        return text
    shown = target_shown(channel, target)
    for secret in sorted(_secret_parts(channel, target), key=len, reverse=True):
        text = text.replace(secret, shown)
    return text


def _secret_parts(channel: str, target: str) -> set[str]:
    if channel == "email":
        return {target, target.rpartition("@")[0]} - {""}
    parts = urlsplit(target)
    userinfo = parts.netloc.rpartition("@")[0]
    pieces = {target, userinfo, parts.password or "", parts.query}
    pieces.add(parts.path if len(parts.path) > 1 else "")
    return {p for p in pieces if len(p) >= 3}
