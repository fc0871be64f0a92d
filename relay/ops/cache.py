"""The cache as an optimisation only: when it is unreachable (Redis down) reads miss and writes
are dropped, loudly in the log, so the relay keeps working without it (installation tokens are
minted again, commit checks asked again, HUD tallies computed again).

After a failure the cache is left alone for a few seconds (per process), so a dead Redis costs
one connection timeout per pause, not one per call."""

import logging
import threading
import time

from django.core.cache import cache

logger = logging.getLogger(__name__)
PAUSE_AFTER_FAILURE_SECONDS = 5.0
_down_until = 0.0
_lock = threading.Lock()


def cache_paused() -> bool:
    return time.monotonic() < _down_until


def cache_failed(what: str, exc: Exception) -> None:
    global _down_until
    with _lock:
        first = not cache_paused()
        _down_until = time.monotonic() + PAUSE_AFTER_FAILURE_SECONDS
    if first:
        logger.warning("cache unavailable (%s): %s; skipping it for %ss", what, exc, PAUSE_AFTER_FAILURE_SECONDS)


def soft_get(key: str, default=None):
    if cache_paused():
        return default
    try:
        return cache.get(key, default)
    except Exception as exc:  # noqa: BLE001 - any cache backend failure is a miss
        cache_failed(f"get {key.split(':')[0]}", exc)
        return default


def soft_get_many(keys: list[str]) -> dict:
    if cache_paused():
        return {}
    try:
        return cache.get_many(keys)
    except Exception as exc:  # noqa: BLE001
        cache_failed("get_many", exc)
        return {}


def soft_set(key: str, value, timeout: int) -> None:
    if cache_paused():
        return
    try:
        cache.set(key, value, timeout)
    except Exception as exc:  # noqa: BLE001
        cache_failed(f"set {key.split(':')[0]}", exc)


def soft_set_many(values: dict, timeout: int) -> None:
    if cache_paused() or not values:
        return
    try:
        cache.set_many(values, timeout)
    except Exception as exc:  # noqa: BLE001
        cache_failed("set_many", exc)


def soft_delete(key: str) -> None:
    if cache_paused():
        return
    try:
        cache.delete(key)
    except Exception as exc:  # noqa: BLE001
        cache_failed(f"delete {key.split(':')[0]}", exc)


def pause_reset() -> None:
    """Tests switch caches under a running process."""
    global _down_until
    _down_until = 0.0


_clients: dict[int, object] = {}


def redis_of(cache_backend=None):
    """The redis-py client behind the default cache when it is Django's Redis backend (for the
    few callers that need one round trip where Django's API takes several), else None. One client
    per connection pool: Django builds a new one per call, which costs more than the round trip."""
    backend = cache_backend or cache
    client = getattr(backend, "_cache", None)
    if client is None or not hasattr(client, "_get_connection_pool") or not hasattr(backend, "make_and_validate_key"):
        return None
    pool = client._get_connection_pool(True)
    redis = _clients.get(id(pool))
    if redis is None:
        redis = _clients[id(pool)] = client._client(connection_pool=pool)
    return redis
