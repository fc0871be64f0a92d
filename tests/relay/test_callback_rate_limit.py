"""relay.callbacks.ratelimit on a real Redis: a question asked now and answered later counts once,
gives its connection up when it is not answered, and survives a connection the server closed."""

import os
import uuid

import pytest
import redis

from relay.callbacks import ratelimit
from relay.callbacks.ratelimit import rate_limit_asked, rate_limit_hit

NOW = 1_800_000_010.0


@pytest.fixture
def real_redis(monkeypatch):
    """The limiter on a redis-py client of its own (REDIS_URL's server, else the local one's db 15,
    away from what `make run` keeps in db 0)."""
    client = redis.Redis.from_url(
        os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15"), socket_connect_timeout=1, socket_timeout=2
    )
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.skip("no Redis server to talk to")
    monkeypatch.setattr(ratelimit, "redis_of", lambda: client)
    yield client
    client.close()


def _repo() -> str:
    return f"org/limited-{uuid.uuid4().hex}"  # a shared Redis keeps counters for two minutes


def _in_use(client) -> int:
    return len(client.connection_pool._in_use_connections)


def test_questions_asked_before_their_answers_are_read_each_count_once(real_redis):
    repo = _repo()
    questions = [rate_limit_asked(repo, limit=2, now=NOW) for _ in range(3)]
    assert [q.decision().allowed for q in questions] == [True, True, False]
    assert _in_use(real_redis) == 0


def _key(client, repo: str) -> str:
    (key,) = client.keys(f"*{repo}*")
    return key


def test_the_window_counter_expires_after_two_windows_counted_from_its_first_call(real_redis):
    repo = _repo()
    rate_limit_hit(repo, limit=5, now=NOW)
    assert 0 < real_redis.ttl(_key(real_redis, repo)) <= 2 * ratelimit.WINDOW_SECONDS
    real_redis.expire(_key(real_redis, repo), 30)
    rate_limit_hit(repo, limit=5, now=NOW)  # a later call does not push the expiry back
    assert real_redis.ttl(_key(real_redis, repo)) <= 30


def test_an_answered_question_hands_its_connection_back_ready_for_the_next(real_redis):
    rate_limit_hit(_repo(), limit=5, now=NOW)
    (connection,) = real_redis.connection_pool._available_connections
    socket_before = connection._sock
    rate_limit_hit(_repo(), limit=5, now=NOW)
    # Both replies were read: the pool hands the same connection out again without reconnecting.
    assert real_redis.connection_pool._available_connections == [connection] and connection._sock is socket_before


def test_a_question_left_unanswered_drops_its_connection_so_no_later_one_reads_its_reply(real_redis):
    for _ in range(50):  # a dropped connection is also caught by redis-py when the reply came in time
        repo = _repo()
        with pytest.raises(RuntimeError), rate_limit_asked(repo, limit=1, now=NOW) as asked:
            connection = asked._count._connection
            raise RuntimeError("the callback failed between the question and its answer")
        assert connection._sock is None and _in_use(real_redis) == 0
        # Redis counted the first call; a connection handed back with its reply unread would
        # answer this question with that stale 1, and allow it.
        assert not rate_limit_hit(repo, limit=1, now=NOW).allowed


def test_a_question_whose_commands_could_not_be_written_degrades_and_gives_its_connection_up(real_redis, monkeypatch):
    def refused(self, *args, **kwargs):
        raise redis.ConnectionError("Connection reset by peer")

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", refused)
    decision = rate_limit_hit(_repo(), limit=5, now=NOW)
    assert decision.allowed and decision.degraded
    assert _in_use(real_redis) == 0


def _pooled_connection_killed(client) -> None:
    """The server closes the connection waiting in the client's pool (as a Redis restart does)."""
    pool = client.connection_pool
    connection = pool.get_connection()
    connection.send_command("CLIENT", "ID")
    client_id = connection.read_response()
    pool.release(connection)
    admin = redis.Redis(**{k: v for k, v in pool.connection_kwargs.items() if k in ("host", "port", "db")})
    assert admin.client_kill_filter(_id=client_id) == 1
    admin.close()


def test_a_connection_the_server_closed_is_replaced_without_degrading(real_redis):
    repo = _repo()
    assert rate_limit_hit(repo, limit=5, now=NOW).allowed
    _pooled_connection_killed(real_redis)
    decision = rate_limit_hit(repo, limit=5, now=NOW)
    assert decision.allowed and not decision.degraded
    assert int(real_redis.get(_key(real_redis, repo))) == 2


def test_a_redis_that_is_down_degrades_to_allowed(monkeypatch):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    down = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1, socket_timeout=1)
    monkeypatch.setattr(ratelimit, "redis_of", lambda: down)
    decision = rate_limit_hit(_repo(), limit=5, now=NOW)
    assert decision.allowed and decision.degraded
    assert _in_use(down) == 0
