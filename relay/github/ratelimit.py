"""A write budget per App installation, under GitHub's secondary rate limits: at most ~900 points a
minute per installation, a POST, PATCH, PUT or DELETE costing 5. A fan-out to many repos is a
burst of POSTs, so writes take their points from a token bucket shared by every worker (in Redis,
one round trip), or per process when there is no Redis. A write that finds the bucket short is not
sent and not waited for: `WriteDeferred` tells the outbox engine to send it again later, without
spending one of its attempts (relay/outbox/engine.py: Outbox.defer).

The bucket holds GITHUB_WRITE_BURST_POINTS and refills at (GITHUB_WRITE_POINTS_PER_MINUTE - burst)
a minute, so no 60 seconds can see more than the per-minute points. Deferred writes queue behind
each other (`queued` points, paid off at the refill rate), so a burst beyond the bucket is spread
over the time the budget needs instead of retrying in lockstep."""

import threading
import time
from dataclasses import dataclass

from django.conf import settings

from relay.ops.cache import cache_failed, cache_paused, redis_of

from ..outbox.engine import Deferred

WRITE_METHODS = frozenset({"POST", "PATCH", "PUT", "DELETE"})


class WriteDeferred(Deferred):
    """The installation's write budget is spent for now: nothing was sent."""

    def __init__(self, installation_id: int, retry_after: float):
        super().__init__(
            f"waiting {retry_after:.1f} s for installation {installation_id}'s GitHub write budget", retry_after
        )


@dataclass(frozen=True)
class TokenBucket:
    capacity: float
    rate: float
    """points per second"""
    cost: float

    @classmethod
    def from_settings(cls) -> "TokenBucket":
        burst, per_minute = settings.GITHUB_WRITE_BURST_POINTS, settings.GITHUB_WRITE_POINTS_PER_MINUTE
        return cls(float(burst), max(per_minute - burst, 1) / 60.0, float(settings.GITHUB_WRITE_POINTS))


def bucket_step(bucket: TokenBucket, state: tuple | None, now: float) -> tuple[tuple, float]:
    """One take: (tokens, queued, stamp) → the new state and the wait (0.0: taken). The Lua
    script below is this function, line for line."""
    tokens, queued, stamp = state or (bucket.capacity, 0.0, now)
    elapsed = max(0.0, now - stamp)
    tokens = min(bucket.capacity, tokens + elapsed * bucket.rate)
    queued = max(0.0, queued - elapsed * bucket.rate)
    wait = 0.0
    if tokens >= bucket.cost:
        tokens -= bucket.cost
    else:
        wait = (bucket.cost - tokens + queued) / bucket.rate
        queued += bucket.cost
    return (tokens, queued, max(now, stamp)), wait


BUCKET_LUA = """
local capacity, rate, cost, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local h = redis.call('HMGET', KEYS[1], 't', 'q', 's')
local tokens, queued, stamp = tonumber(h[1]) or capacity, tonumber(h[2]) or 0, tonumber(h[3]) or now
local elapsed = math.max(0, now - stamp)
tokens = math.min(capacity, tokens + elapsed * rate)
queued = math.max(0, queued - elapsed * rate)
local wait = 0
if tokens >= cost then
  tokens = tokens - cost
else
  wait = (cost - tokens + queued) / rate
  queued = queued + cost
end
redis.call('HSET', KEYS[1], 't', tokens, 'q', queued, 's', math.max(now, stamp))
redis.call('EXPIRE', KEYS[1], math.ceil((capacity + queued) / rate) + 60)
return tostring(wait)
"""

_local: dict[str, tuple] = {}
_local_lock = threading.Lock()
_scripts: dict[int, object] = {}


def write_take(installation_id: int, now: float | None = None) -> float:
    """Take one write's points from the installation's bucket: 0.0 when taken, else how many
    seconds to wait before trying again."""
    bucket, now = TokenBucket.from_settings(), time.time() if now is None else now
    key = f"crcr:gh-write-budget:{settings.GITHUB_API_URL}:{installation_id}"
    redis = None if cache_paused() else redis_of()
    if redis is not None:
        try:
            return _redis_take(redis, bucket, key, now)
        except Exception as exc:  # noqa: BLE001 - Redis down: this process's own bucket, as without Redis
            cache_failed("write budget", exc)
    with _local_lock:
        _local[key], wait = bucket_step(bucket, _local.get(key), now)
    return wait


def _redis_take(redis, bucket: TokenBucket, key: str, now: float) -> float:
    script = _scripts.get(id(redis))
    if script is None:
        script = _scripts[id(redis)] = redis.register_script(BUCKET_LUA)
    return float(script(keys=[key], args=[bucket.capacity, bucket.rate, bucket.cost, now]))


def write_budget_check(installation_id: int, method: str) -> None:
    """Raise WriteDeferred when a write to GitHub as this installation must wait."""
    if method.upper() not in WRITE_METHODS:
        return
    wait = write_take(installation_id)
    if wait > 0:
        raise WriteDeferred(installation_id, wait)


def local_buckets_reset() -> None:
    """Tests start from full buckets."""
    with _local_lock:
        _local.clear()
