"""Keeping SQLite's query planner informed: without statistics it picks plans that walk whole
tables (the grid's dispatch states took 1.2-3 s at a million jobs, 3 ms after ANALYZE)."""

import time

from django.db import connection

STATISTICS_EVERY_SECONDS = 3600
_last_run = 0.0


def statistics_refresh(force: bool = False) -> bool:
    """ANALYZE at most hourly per process (`force`: now), on a sample of each index
    (`analysis_limit`, ~0.1 s at a million jobs); PostgreSQL's autovacuum keeps its own
    statistics. True when it ran."""
    global _last_run
    if connection.vendor != "sqlite" or not (force or time.monotonic() - _last_run > STATISTICS_EVERY_SECONDS):
        return False
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA analysis_limit = 1000")
        cursor.execute("ANALYZE")
    _last_run = time.monotonic()
    return True
