"""Request bodies with a size limit the client hears about.

Answering 413 without reading the body makes the server close a connection the client is still
writing to: the client sees a reset, not the 413. So an oversized body is read and thrown away
first — up to DRAIN_MAX_BYTES and for at most DRAIN_SECONDS, after which the connection is given up
(no legitimate client sends that much) — and only then answered."""

import time

from django.core.exceptions import BadRequest

DRAIN_MAX_BYTES = 64 * 1024 * 1024
DRAIN_SECONDS = 5.0
CHUNK = 256 * 1024


class BodyTooSlow(BadRequest):
    """The client did not send its body within CRCR_BODY_READ_SECONDS (crcr/body_deadline.py):
    408 from relay.middleware.SlowBodyMiddleware, or Django's 400 where it is read before a view."""


def declared_length(request) -> int:
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


def body_within(request, limit: int) -> bytes | None:
    """The body when it is at most `limit` bytes; otherwise None, with the body drained."""
    if declared_length(request) > limit:
        body_drain(request)
        return None
    body = request.body
    return body if len(body) <= limit else None


def body_drain(request) -> int:
    """Read and discard what the client is sending (bounded in bytes and time); bytes read."""
    deadline = time.monotonic() + DRAIN_SECONDS
    remaining = min(declared_length(request), DRAIN_MAX_BYTES)
    drained = 0
    while remaining > 0 and time.monotonic() < deadline:
        try:
            chunk = request.read(min(CHUNK, remaining))
        except Exception:  # noqa: BLE001 - a client that stops sending (or lied about the length) ends the drain
            break
        if not chunk:
            break
        drained += len(chunk)
        remaining -= len(chunk)
    return drained
