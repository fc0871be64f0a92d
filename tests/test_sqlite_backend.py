"""crcr/sqlite: this process's SQLite write transactions queue on one lock, and every way out of a
transaction gives it back; its cursors remember each statement's placeholders."""

import threading

import pytest
from django.db import connection, transaction

from crcr.sqlite.base import WRITE_LOCK, _qmark

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "sqlite", reason="the lock belongs to the SQLite backend"),
]


def test_a_transaction_holds_the_process_write_lock_until_it_commits():
    with transaction.atomic():
        assert WRITE_LOCK.locked()
        with transaction.atomic():  # a savepoint inside: no second acquisition, no deadlock
            assert WRITE_LOCK.locked()
    assert not WRITE_LOCK.locked()


def test_a_rolled_back_transaction_gives_the_lock_back():
    with pytest.raises(RuntimeError), transaction.atomic():
        assert WRITE_LOCK.locked()
        raise RuntimeError("the work failed")
    assert not WRITE_LOCK.locked()


def test_a_connection_closed_inside_a_transaction_gives_the_lock_back():
    with transaction.atomic():
        connection.close()
    assert not WRITE_LOCK.locked()


def test_a_second_thread_waits_for_the_first_writer_and_then_writes():
    from relay.models import Installation

    inside, done = threading.Event(), []

    def second_writer():
        inside.wait(10)
        with transaction.atomic():
            done.append(Installation.objects.create(installation_id=2, account_login="b").pk)
        connection.close()

    thread = threading.Thread(target=second_writer)
    thread.start()
    with transaction.atomic():
        Installation.objects.create(installation_id=1, account_login="a")
        inside.set()
        thread.join(0.3)
        assert thread.is_alive() and not done  # queued on the lock, not writing beside us
    thread.join(10)
    assert not thread.is_alive() and len(done) == 1
    assert Installation.objects.count() == 2


def test_a_statement_run_again_reads_its_placeholders_from_memory_and_answers_the_same():
    _qmark.cache_clear()
    with connection.cursor() as cursor:
        for _ in range(3):
            cursor.execute("SELECT %s || '%%', %s", ["a", 2])
            assert cursor.fetchone() == ("a%", 2)
        cursor.execute("SELECT %(x)s, %(y)s", {"x": 1, "y": "b"})  # Django's named style, unchanged
        assert cursor.fetchone() == (1, "b")
    assert _qmark.cache_info().hits >= 2
