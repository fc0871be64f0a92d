"""How a notification is said on each channel: a generic JSON webhook, a Slack-compatible
webhook (`text` plus mrkdwn blocks, which Slack, Mattermost and Rocket.Chat accept) and email.
Outbound HTTP has explicit timeouts, follows no redirects and, unless allowed, refuses private
and loopback addresses (webhook targets are user input)."""

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.core.mail import send_mail

from relay.params import int_param

TIMEOUT = httpx.Timeout(10.0, connect=5.0)
_client: httpx.Client | None = None


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


def client() -> httpx.Client:
    global _client
    if _client is None:
        _client = httpx.Client(
            timeout=TIMEOUT, follow_redirects=False, headers={"User-Agent": "crcr-hud-notifications"}
        )
    return _client


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
    """POST the body; the status code on 2xx, else SendError (transient for 429, 5xx and network
    failures, permanent for other answers)."""
    _refuse_private(url)
    try:
        response = client().post(url, json=body, headers=headers)
    except httpx.InvalidURL as exc:
        raise SendError(f"InvalidURL: {exc}", permanent=True) from exc
    except httpx.HTTPError as exc:
        raise SendError(f"{exc.__class__.__name__}: {exc}", permanent=False) from exc
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


def _refuse_private(url: str) -> None:
    if settings.CRCR_NOTIFY_ALLOW_PRIVATE:
        return
    host = urlsplit(url).hostname or ""
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError as exc:
        raise SendError(f"cannot resolve {host}: {exc}", permanent=False) from exc
    if any(not ipaddress.ip_address(a.split("%")[0]).is_global for a in addresses):
        raise SendError(f"{host} resolves to a private or loopback address", permanent=True)


def email_send(address: str, message: Message) -> None:
    body = "\n".join([message.title, "", *message.lines, "", message.url]).strip()
    try:
        send_mail(
            f"[CRCR HUD] {message.title}"[:200], body, settings.DEFAULT_FROM_EMAIL, [address], fail_silently=False
        )
    except OSError as exc:
        raise SendError(f"{exc.__class__.__name__}: {exc}", permanent=False) from exc
