"""Django's PostgreSQL backend, without a health check for a connection that has just proved
itself, and with a cursor whose statements the server prepares.

With CONN_HEALTH_CHECKS Django asks a kept connection `SELECT 1` before each request's first
statement: a round trip per request (about 0.12 ms here, a tenth of a callback's round trips on
PostgreSQL; docs/performance.md). A connection that ended a request in which it ran statements
without a database error, less than FRESH_SECONDS ago, is taken as healthy. What that risks is
small: a server restart inside that second fails the next request exactly as a restart in the
middle of it would, Django marks the connection (errors_occurred), and the request after it
checks and reconnects. A connection idle for longer is checked as Django checks it."""

import time

import psycopg
from django.db.backends.postgresql import base

FRESH_SECONDS = 1.0


class DatabaseWrapper(base.DatabaseWrapper):
    _proven_at: float | None = None
    """When (time.monotonic) this connection last ended a request in which it worked."""
    _used = False
    """Whether a cursor was made since Django last settled the connection's health."""

    def prepared_cursor(self):
        """Django's `cursor()`, but over psycopg's server-side binding cursor: the statement's
        text and its values travel apart, so psycopg prepares a statement (its text and its
        values' types) on this connection after it has run `prepare_threshold` times here
        (crcr/settings.py), in an LRU of 100. Django's own cursors bind on the client and never
        prepare. For the callback's few hot statements (relay/callbacks/job_rows.py)."""
        self.close_if_health_check_failed()
        self.ensure_connection()
        with self.wrap_database_errors:
            return self._prepare_cursor(psycopg.Cursor(self.connection))

    def _prepare_cursor(self, cursor):
        # Every cursor passes here, Django's and prepared_cursor's.
        self._used = True
        return super()._prepare_cursor(cursor)

    def close_if_unusable_or_obsolete(self):
        # Django calls this as each request (and each Celery task) starts and ends.
        worked = self.connection is not None and self._used and not self.errors_occurred
        self._used = False
        super().close_if_unusable_or_obsolete()
        now = time.monotonic()
        if self.connection is None:
            self._proven_at = None
        elif worked:
            self._proven_at = now
        elif self._proven_at is not None and now - self._proven_at < FRESH_SECONDS:
            self.health_check_done = True
