"""Per-repo callback rate limit through the cache (atomic INCR on Redis, one round trip), in
fixed one-minute windows. If the cache is down the limit is skipped, loudly: a callback is never
lost to it."""

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from ..github.softcache import redis_of

logger = logging.getLogger(__name__)
WINDOW_SECONDS = 60


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after: int = 0
    degraded: bool = False


def rate_limit_hit(repo: str, limit: int | None = None, now: float | None = None) -> RateDecision:
    limit = limit or settings.CRCR_CALLBACK_RATE_PER_MIN
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    key = f"ratelimit:callback:{repo.lower()}:{window}"
    try:
        count = window_count(key)
    except Exception as exc:  # noqa: BLE001 - any cache failure degrades to "allowed"
        logger.error("rate limiter unavailable, allowing callback from %s: %s", repo, exc)
        return RateDecision(allowed=True, degraded=True)
    if count > limit:
        return RateDecision(allowed=False, retry_after=max(1, int((window + 1) * WINDOW_SECONDS - now) + 1))
    return RateDecision(allowed=True)


def window_count(key: str) -> int:
    """Count one more call in this window's counter; the counter outlives its window briefly."""
    redis = redis_of()
    if redis is None:
        cache.add(key, 0, WINDOW_SECONDS * 2)
        return cache.incr(key)
    full = cache.make_and_validate_key(key)
    count, _ = redis.pipeline(transaction=False).incr(full).expire(full, WINDOW_SECONDS * 2, nx=True).execute()
    return count
