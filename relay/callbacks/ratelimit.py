"""Per-repo callback rate limit through the cache (atomic INCR on Redis, one round trip), in
fixed one-minute windows. If the cache is down the limit is skipped, loudly: a callback is never
lost to it.

On Redis the question is asked before its answer is needed (`rate_limit_asked`): the INCR is
sent, the caller reads the report, checks its callback_token and (where a new row is not one
statement: relay/callbacks/receive.py) looks its dispatch up while Redis answers, and
`decision()` reads the reply. With one client the Redis round trip was a tenth of a callback's
wall time on PostgreSQL + Redis, spent waiting (docs/performance.md, "Callbacks, 2026-12-04
(night)"). The price: such a callback refused with 429 has cost one indexed database read."""

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from relay.ops.cache import redis_of

logger = logging.getLogger(__name__)
WINDOW_SECONDS = 60


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after: int = 0
    degraded: bool = False


def rate_limit_hit(repo: str, limit: int | None = None, now: float | None = None) -> RateDecision:
    """Count one more callback from `repo` and decide at once."""
    with rate_limit_asked(repo, limit, now) as asked:
        return asked.decision()


def rate_limit_asked(repo: str, limit: int | None = None, now: float | None = None) -> "RateQuestion":
    """Count one more callback from `repo`; the decision is read later (`decision()`). Use it as
    a context manager: a question left unanswered gives its Redis connection up."""
    limit = limit or settings.CRCR_CALLBACK_RATE_PER_MIN
    now = time.time() if now is None else now
    window = int(now // WINDOW_SECONDS)
    key = f"ratelimit:callback:{repo.lower()}:{window}"
    try:
        count = window_count_sent(key)
    except Exception as exc:  # noqa: BLE001 - any cache failure degrades to "allowed"
        count = Unanswered(exc)
    return RateQuestion(repo, limit, (window + 1) * WINDOW_SECONDS - now, count)


class RateQuestion:
    def __init__(self, repo: str, limit: int, window_left: float, count: "SentCount | KnownCount | Unanswered"):
        self._repo, self._limit, self._window_left, self._count = repo, limit, window_left, count

    def __enter__(self) -> "RateQuestion":
        return self

    def __exit__(self, *exc) -> None:
        self._count.close()

    def decision(self) -> RateDecision:
        try:
            count = self._count.count()
        except Exception as exc:  # noqa: BLE001 - any cache failure degrades to "allowed"
            logger.error("rate limiter unavailable, allowing callback from %s: %s", self._repo, exc)
            return RateDecision(allowed=True, degraded=True)
        if count > self._limit:
            return RateDecision(allowed=False, retry_after=max(1, int(self._window_left) + 1))
        return RateDecision(allowed=True)


def window_count_sent(key: str) -> "SentCount | KnownCount":
    """Count one more call in this window's counter (which outlives its window briefly): on Redis
    the commands are sent, their reply read by `count()`; on another cache counted at once."""
    redis = redis_of()
    if redis is None:
        cache.add(key, 0, WINDOW_SECONDS * 2)
        return KnownCount(cache.incr(key))
    return SentCount(redis, cache.make_and_validate_key(key))


class KnownCount:
    """A count known already (read as a `SentCount`'s)."""

    def __init__(self, value: int):
        self._value = value

    def count(self) -> int:
        return self._value

    def close(self) -> None:
        pass


class Unanswered(KnownCount):
    """The cache failed as the question was asked: `count()` raises what it raised."""

    def __init__(self, error: Exception):
        self._error = error

    def count(self) -> int:
        raise self._error


class SentCount:
    """INCR and EXPIRE NX written on a pooled connection, their replies not read yet. The
    connection goes back to the pool once both are read, and is dropped when they are not
    (unread replies would answer its next user). A pooled connection the server has closed
    meanwhile (Redis restarted) is replaced as the pool hands it out (redis-py's
    `get_connection` finds data or the close waiting on it)."""

    def __init__(self, redis, key: str):
        self._pool = redis.connection_pool
        self._connection = self._pool.get_connection()
        commands = [("INCR", key), ("EXPIRE", key, WINDOW_SECONDS * 2, "NX")]
        with self._closed_on_error():
            self._connection.send_packed_command(self._connection.pack_commands(commands))

    def count(self) -> int:
        with self._closed_on_error():
            count = self._connection.read_response()
            self._connection.read_response()
        connection, self._connection = self._connection, None
        self._pool.release(connection)
        return count

    def close(self) -> None:
        """Give the connection up unread: disconnected, then back to the pool."""
        if self._connection is not None:
            connection, self._connection = self._connection, None
            connection.disconnect()
            self._pool.release(connection)

    @contextmanager
    def _closed_on_error(self):
        try:
            yield
        except BaseException:
            self.close()
            raise
