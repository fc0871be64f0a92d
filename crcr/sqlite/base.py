"""Django's SQLite backend, with this process's write transactions queued on one lock.

Every transaction here begins IMMEDIATE (crcr/settings.py): it takes SQLite's write lock up
front. A thread that finds the lock taken waits in SQLite's busy handler, which sleeps in
growing steps (up to 100 ms) instead of waking when the lock frees: with 8 web threads the
callback p99 was 0.4-1.5 s at the same throughput (docs/performance.md, "Callbacks"). Queued on a
threading.Lock, a waiting thread wakes as soon as the writer before it commits. Other processes
(the worker, beat) still meet SQLite's own lock and busy handler, as before.

The lock is taken where Django begins the transaction and given back where autocommit returns
(after COMMIT or ROLLBACK) or the connection closes, so no path out of `atomic()` keeps it.

Its cursors remember each statement's conversion to SQLite's `?` placeholders: Django rewrites
every statement's `%s` with a regular expression on every run, 22 us for a callback's job-row
INSERT (docs/performance.md, "Where each millisecond goes"), and a process runs the same few
hundred statement texts again and again."""

import threading
from functools import lru_cache

from django.db.backends.sqlite3 import base

WRITE_LOCK = threading.Lock()
"""Held by the one thread of this process inside a write transaction."""


@lru_cache(maxsize=2048)
def _qmark(query: str) -> str:
    """Django's "format" to "qmark" conversion (SQLiteCursorWrapper.convert_query), remembered."""
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class CursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query, *, param_names=None):
        if param_names is None:
            return _qmark(query)
        return super().convert_query(query, param_names=param_names)


class DatabaseWrapper(base.DatabaseWrapper):
    _holds_write_lock = False

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=CursorWrapper)

    def _start_transaction_under_autocommit(self):
        # A bounded wait: past the SQLite timeout, fall through to SQLite's own lock and error.
        self._holds_write_lock = WRITE_LOCK.acquire(timeout=self.settings_dict["OPTIONS"].get("timeout", 5))
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._write_lock_release()
            raise

    def _set_autocommit(self, autocommit):
        super()._set_autocommit(autocommit)
        if autocommit:
            self._write_lock_release()

    def _close(self):
        try:
            super()._close()
        finally:
            self._write_lock_release()

    def _write_lock_release(self):
        if self._holds_write_lock:
            self._holds_write_lock = False
            WRITE_LOCK.release()
