"""Reading a GitHub webhook request: the HMAC-SHA256 signature over the raw body, then the body
itself (JSON, or form-encoded `payload=`). Each refusal carries the status and the reason."""

import hashlib
import hmac
import json
from dataclasses import dataclass
from urllib.parse import parse_qs

from relay.inputs import jsonin

from .payload_shape import ShapeError, payload_shape_check

MAX_BODY_BYTES = 25 * 1024 * 1024
"""GitHub caps payloads at 25 MB and does not deliver larger events."""


class WebhookRejected(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class WebhookRequest:
    event: str
    guid: str
    """X-GitHub-Delivery."""
    payload: dict
    size: int


def signature_expected(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signature_verify(secret: str, body: bytes, header_256: str | None, header_sha1: str | None) -> None:
    if not header_256:
        if header_sha1:
            raise WebhookRejected(401, "X-Hub-Signature (SHA-1) alone is not accepted; X-Hub-Signature-256 is required")
        raise WebhookRejected(401, "missing X-Hub-Signature-256")
    if not hmac.compare_digest(signature_expected(secret, body), header_256.strip()):
        raise WebhookRejected(401, "bad signature")


def webhook_read(headers, body: bytes, secret: str) -> WebhookRequest:
    """Verify, then parse. `headers` is a case-insensitive mapping (Django's request.headers)."""
    if len(body) > MAX_BODY_BYTES:
        raise WebhookRejected(413, "payload larger than GitHub's 25 MB limit")
    signature_verify(secret, body, headers.get("X-Hub-Signature-256"), headers.get("X-Hub-Signature"))
    event = (headers.get("X-GitHub-Event") or "").strip()
    guid = (headers.get("X-GitHub-Delivery") or "").strip()
    if not event:
        raise WebhookRejected(400, "missing X-GitHub-Event")
    if not guid or len(guid) > 100:
        raise WebhookRejected(400, "missing or malformed X-GitHub-Delivery")
    payload = _decode(headers.get("Content-Type") or "", body)
    try:
        payload_shape_check(event, payload)
    except ShapeError as exc:
        raise WebhookRejected(400, str(exc)) from exc
    return WebhookRequest(event=event, guid=guid, payload=payload, size=len(body))


def _decode(content_type: str, body: bytes) -> dict:
    media_type = content_type.split(";")[0].strip().lower()
    if media_type == "application/json":
        text = body
    elif media_type == "application/x-www-form-urlencoded":
        text = _form_payload(body)
    else:
        raise WebhookRejected(
            415,
            f"unsupported content type {media_type or '(none)'}: use application/json or application/x-www-form-urlencoded",
        )
    try:
        payload = jsonin.loads(text)
    except jsonin.NotStorable as exc:  # numbers no double holds, nesting past jsonin.MAX_DEPTH
        raise WebhookRejected(400, str(exc)) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise WebhookRejected(400, f"body is not valid JSON: {exc}") from exc
    if not isinstance(payload, dict):
        raise WebhookRejected(400, "body must be a JSON object")
    return _storable(payload, text)


def _storable(payload: dict, text) -> dict:
    """GitHub's payload is legitimate even when a title holds a NUL or a lone surrogate, which
    PostgreSQL cannot store: drop NULs and replace broken characters rather than refuse it."""
    raw = text if isinstance(text, str) else text.decode("utf-8", errors="replace")
    if "\\u0000" not in raw and "\\ud" not in raw.lower():
        return payload
    try:
        return json.loads(json.dumps(payload).replace("\\u0000", ""), object_hook=_repair)
    except ValueError:  # a literal "\\u0000" text made the cut unparseable: repair only
        return json.loads(json.dumps(payload), object_hook=_repair)


def _repair(obj: dict) -> dict:
    return {
        _text(k): (
            _text(v)
            if isinstance(v, str)
            else [_text(x) if isinstance(x, str) else x for x in v]
            if isinstance(v, list)
            else v
        )
        for k, v in obj.items()
    }


def _text(value: str) -> str:
    return value.encode("utf-8", errors="replace").decode("utf-8")


def _form_payload(body: bytes) -> str:
    try:
        values = parse_qs(body.decode("utf-8"), strict_parsing=True).get("payload")
    except (ValueError, UnicodeDecodeError) as exc:
        raise WebhookRejected(400, f"form body is malformed: {exc}") from exc
    if not values:
        raise WebhookRejected(400, "form body has no payload field")
    return values[0]
