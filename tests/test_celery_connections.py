"""A Celery task settles its database connections as Django settles a request's (crcr/celery.py):
a working one is kept for the next task, an obsolete or broken one is closed, and an eager task
leaves its caller's alone."""

import time
from types import SimpleNamespace

import pytest
from celery.signals import task_postrun, task_prerun
from django.db import connection, transaction

from crcr.celery import app

pytestmark = pytest.mark.django_db(transaction=True)


class _Task:
    def __init__(self, eager: bool):
        self.request = SimpleNamespace(is_eager=eager)


def _run_as_a_task(work, eager: bool = False) -> None:
    task = _Task(eager)
    task_prerun.send(sender=task, task=task)
    work()
    task_postrun.send(sender=task, task=task)


def _query():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def test_a_task_keeps_a_working_connection_for_the_next():
    _run_as_a_task(_query)
    kept = connection.connection
    _run_as_a_task(_query)
    assert kept is not None and connection.connection is kept


def test_a_task_closes_a_connection_older_than_conn_max_age():
    _run_as_a_task(_query)
    connection.close_at = time.monotonic() - 1
    _run_as_a_task(lambda: None)
    assert connection.connection is None


def test_an_eager_task_leaves_its_callers_transaction_and_connection_alone():
    with transaction.atomic():
        _query()
        held = connection.connection
        _run_as_a_task(_query, eager=True)
        assert connection.connection is held and connection.in_atomic_block


def test_celerys_own_fixup_no_longer_closes_them_around_every_task():
    assert app.conf.get("CELERY_DB_REUSE_MAX") >= 100_000
