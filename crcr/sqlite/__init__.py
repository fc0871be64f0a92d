"""SQLite with in-process queueing of write transactions (see base.py)."""
