"""How a notification is said on each channel: a generic JSON webhook, a Slack-compatible
webhook (`text` plus mrkdwn blocks, which Slack, Mattermost and Rocket.Chat accept) and email.
Outbound HTTP has explicit timeouts, follows no redirects and, unless allowed, refuses private
and loopback addresses (webhook targets are user input).

The address checked is the address connected to: the host is resolved once, every address it
has is checked, and the request goes to one of those addresses with the name kept in the Host
header and the TLS server name (whose certificate is verified). Letting the HTTP client resolve
the name again would let a DNS answer that changed in between (rebinding, a TTL of 0) send the
request to an internal address. Each send has its own connection: a pooled one, keyed by the
address alone, could carry another name's request."""

import ipaddress
import socket
from dataclasses import dataclass

import httpx
from django.conf import settings
from django.core.mail import send_mail

from relay.inputs.params import int_param

TIMEOUT = httpx.Timeout(10.0, connect=5.0)


@dataclass(frozen=True)
class Message:
    kind: str
    title: str
    lines: list[str]
    payload: dict
    url: str


class SendError(Exception):
    def __init__(self, message: str, permanent: bool, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.permanent, self.status, self.retry_after = permanent, status, retry_after


@dataclass(frozen=True)
class Pinned:
    """The target URL with one checked address as its host, and the name it had."""

    url: httpx.URL
    host_header: str
    server_name: str | None
    """The TLS server name (SNI and the certificate's name); None for http or an address."""

    @property
    def extensions(self) -> dict:
        return {"sni_hostname": self.server_name} if self.server_name else {}


def session() -> httpx.Client:
    return httpx.Client(timeout=TIMEOUT, follow_redirects=False, headers={"User-Agent": "crcr-hud-notifications"})


def generic_body(message: Message) -> dict:
    return {
        "kind": message.kind,
        "title": message.title,
        "text": "\n".join(message.lines),
        "url": message.url,
        **message.payload,
    }


def slack_body(message: Message) -> dict:
    text = f"*{_slack_escape(message.title)}*\n" + "\n".join(_slack_escape(line) for line in message.lines)
    link = f"<{message.url}|Open in CRCR HUD>" if message.url else ""
    return {
        "text": f"{message.title} {message.url}".strip(),
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f"{text}\n{link}"[:2900]}}],
    }


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def webhook_post(url: str, body: dict, headers: dict) -> int:
    """POST the body to one of the target's checked addresses (the next on a failed connect);
    the status code on 2xx, else SendError (transient for 429, 5xx and network failures,
    permanent for other answers)."""
    targets = pinned_targets(url)
    with session() as http:
        for number, target in enumerate(targets, 1):
            try:
                response = http.post(
                    target.url,
                    json=body,
                    headers={**headers, "Host": target.host_header},
                    extensions=target.extensions,
                )
                break
            except httpx.ConnectError as exc:
                if number == len(targets):
                    raise SendError(f"ConnectError: {exc}", permanent=False) from exc
            except httpx.InvalidURL as exc:
                raise SendError(f"InvalidURL: {exc}", permanent=True) from exc
            except httpx.HTTPError as exc:
                raise SendError(f"{exc.__class__.__name__}: {exc}", permanent=False) from exc
    return _answered(response)


def _answered(response: httpx.Response) -> int:
    if 200 <= response.status_code < 300:
        return response.status_code
    transient = response.status_code == 429 or response.status_code >= 500
    raise SendError(
        f"HTTP {response.status_code}: {response.text[:300]}",
        permanent=not transient,
        status=response.status_code,
        retry_after=_retry_after(response),
    )


def _retry_after(response: httpx.Response) -> float | None:
    seconds = int_param(response.headers.get("retry-after", "").strip())
    return float(seconds) if seconds is not None else None


def pinned_targets(url: str) -> list[Pinned]:
    """The URL once per address its host resolves to, each checked: none may be private or
    loopback unless CRCR_NOTIFY_ALLOW_PRIVATE (a name with one such address is refused whole)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise SendError(f"InvalidURL: {exc}", permanent=True) from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise SendError("the target is not an http(s) URL with a host", permanent=True)
    addresses = _resolved(parsed.host, parsed.port or (443 if parsed.scheme == "https" else 80))
    if not settings.CRCR_NOTIFY_ALLOW_PRIVATE and any(not ipaddress.ip_address(a).is_global for a in addresses):
        raise SendError(f"{parsed.host} resolves to a private or loopback address", permanent=True)
    named = parsed.scheme == "https" and not _is_address(parsed.host)
    server_name = parsed.raw_host.decode("ascii") if named else None
    return [Pinned(parsed.copy_with(host=a), parsed.netloc.decode("ascii"), server_name) for a in addresses]


def _resolved(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise SendError(f"cannot resolve {host}: {exc}", permanent=False) from exc
    return list(dict.fromkeys(info[4][0].split("%")[0] for info in infos))


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def email_send(address: str, message: Message) -> None:
    body = "\n".join([message.title, "", *message.lines, "", message.url]).strip()
    try:
        send_mail(
            f"[CRCR HUD] {message.title}"[:200], body, settings.DEFAULT_FROM_EMAIL, [address], fail_silently=False
        )
    except OSError as exc:
        raise SendError(f"{exc.__class__.__name__}: {exc}", permanent=False) from exc
