"""crcr/postgresql: a kept connection that has just worked skips the health check's SELECT 1; one
idle for longer, or one that failed, is checked as Django checks it, and a dead one is replaced."""

import psycopg
import pytest
from django.db import connection

from crcr.postgresql import base

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the backend is PostgreSQL's"),
]


@pytest.fixture
def checks(monkeypatch):
    """How many times the health check asked the server, and a clock the test moves."""
    asked, clock = [], [1000.0]
    real = base.DatabaseWrapper.is_usable
    monkeypatch.setattr(base.DatabaseWrapper, "is_usable", lambda self: asked.append(1) or real(self))
    monkeypatch.setattr(base.time, "monotonic", lambda: clock[0])
    return asked, clock


def _request(statement="SELECT 1"):
    """What Django does around a request that runs one statement."""
    connection.close_if_unusable_or_obsolete()
    with connection.cursor() as cursor:
        cursor.execute(statement)
        row = cursor.fetchone()
    connection.close_if_unusable_or_obsolete()
    return row


def test_a_connection_that_just_worked_is_not_asked_again(checks):
    asked, clock = checks
    _request()
    asked.clear()
    for _ in range(5):
        clock[0] += 0.5
        _request()
    assert asked == []


def test_a_connection_idle_past_a_second_is_checked_before_its_next_request(checks):
    asked, clock = checks
    _request()
    asked.clear()
    clock[0] += base.FRESH_SECONDS + 0.1
    _request()
    assert asked == [1]


def test_a_request_that_never_touched_the_database_proves_nothing(checks):
    asked, clock = checks
    _request()
    connection.close_if_unusable_or_obsolete()  # a request without a statement
    clock[0] += base.FRESH_SECONDS - 0.1
    connection.close_if_unusable_or_obsolete()
    clock[0] += 0.2  # past a second since the last request that worked
    asked.clear()
    _request()
    assert asked == [1]


def test_a_connection_the_server_dropped_while_idle_is_replaced_before_the_next_request(checks):
    asked, clock = checks
    _request()
    pid = connection.connection.info.backend_pid
    with psycopg.connect(connection.connection.info.dsn, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    clock[0] += base.FRESH_SECONDS + 0.1
    assert _request("SELECT 42") == (42,)
    assert connection.connection.info.backend_pid != pid
