"""The cache as an optimisation only: when it is unreachable (Redis down) reads miss and writes
are dropped, loudly in the log, so the relay keeps working without it (installation tokens are
minted again, commit checks asked again)."""

import logging

from django.core.cache import cache

logger = logging.getLogger(__name__)


def soft_get(key: str, default=None):
    try:
        return cache.get(key, default)
    except Exception as exc:  # noqa: BLE001 - any cache backend failure is a miss
        logger.warning("cache unavailable, treating %s as a miss: %s", key.split(":")[0], exc)
        return default


def soft_set(key: str, value, timeout: int) -> None:
    try:
        cache.set(key, value, timeout)
    except Exception as exc:  # noqa: BLE001
        logger.warning("cache unavailable, not caching %s: %s", key.split(":")[0], exc)


def soft_delete(key: str) -> None:
    try:
        cache.delete(key)
    except Exception as exc:  # noqa: BLE001
        logger.warning("cache unavailable, could not drop %s: %s", key.split(":")[0], exc)
