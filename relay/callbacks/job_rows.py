"""The callback's statements, one per state change, written out once from the models' fields.

Every callback is a few small writes (the token's jti, the job row, its failed tests), and with
Django's query compiler in between, compiling them cost more CPU than the database spent running
them (docs/performance.md, "Callbacks"). So the hot statements are plain SQL, built once per
model from its concrete fields, with every value prepared by its own field
(`get_db_prep_save`: JSON, datetimes and booleans come out exactly as the ORM writes them), on
SQLite and PostgreSQL alike (both have `INSERT … ON CONFLICT DO NOTHING … RETURNING`). A read
gives model instances through the ORM's own converters and `Model.from_db` (what
`Model.objects.raw` does, at a fifth of its cost). Each statement's text is built once per
model, columns and database vendor, and each call reads the connection once: every attribute
read through `django.db.connection` is a lookup in a context-local, about seventy per callback
when the values were prepared through it.

On PostgreSQL these statements are also prepared on the server (`_cursor`): Django's own cursors
bind values on the client, so each statement reached the server as new text, parsed and planned
again for every callback (docs/performance.md, "Callbacks, 2026-12-04 (later)")."""

from contextlib import contextmanager, nullcontext
from functools import cache

from django.db import DEFAULT_DB_ALIAS, connections
from django.utils import timezone

from ..models import Dispatch, FailedTest, JobRun, UsedToken

JOB_KEY = ("delivery_key", "project_id", "run_id", "run_attempt", "job_name")
"""The columns of JobRun's `job_run_key_unique`: one row per (delivery, repo, run, attempt, job)."""
JOB_STATE_COLUMNS = (
    "id",
    "status",
    "conclusion",
    "ended_by",
    "pr_number",
    "in_progress_at",
    "event_type",
    "workflow_url",
    "artifact_url",
    "check_run_id",
    "reported_started_at",
    "environment",
    "triage_verdict",
)
"""What the state machine reads of an existing row: its state, and what a completion keeps."""
DISPATCH_COLUMNS = ("id", "delivery_id", "project_id", "state", "event_type", "pr_number", "head_sha", "sent_at")
"""What a callback reads of the dispatch it answers."""


def _db():
    """The default connection itself, read once per statement (see the module docstring)."""
    return connections[DEFAULT_DB_ALIAS]


def _cursor(db):
    """A cursor for one of the hot statements below: on PostgreSQL one whose statements the server
    prepares (crcr/postgresql: `prepared_cursor`), elsewhere Django's (Python's sqlite3 keeps its
    own statement cache)."""
    prepared = getattr(db, "prepared_cursor", None)
    return prepared() if prepared is not None else db.cursor()


def batch():
    """Statements sent inside the block travel together: on PostgreSQL in one round trip when the
    block ends (crcr/postgresql: `pipeline`, with the transaction's BEGIN), elsewhere one by one
    as they are sent. Read what they answered (`Sent.row`) after the block."""
    pipeline = getattr(_db(), "pipeline", None)
    return pipeline() if pipeline is not None else nullcontext()


class Sent:
    """A statement sent whose answer is read later: inside `batch()` on PostgreSQL it has not
    reached the server yet."""

    __slots__ = ("_cursor", "_row")

    def __init__(self, sql: str, params: list):
        self._cursor, self._row = _cursor(_db()), None
        with closed_on_error(self):
            self._cursor.execute(sql, params)

    def row(self):
        """The statement's first row (None when it gave none); the first call reads it and
        closes the cursor."""
        if self._cursor is not None:
            try:
                self._row = self._cursor.fetchone()
            finally:
                self.close()
        return self._row

    def close(self) -> None:
        """Give the cursor back unread (its statement's answer is no longer wanted)."""
        if self._cursor is not None:
            self._cursor, cursor = None, self._cursor
            cursor.close()


@contextmanager
def closed_on_error(sent: "Sent"):
    """Close `sent`'s cursor when the block raises: its answer will not be read, and an open
    cursor keeps SQLite from releasing the enclosing savepoint."""
    try:
        yield
    except BaseException:
        sent.close()
        raise


@cache
def _fields(model) -> dict:
    return {f.attname: f for f in model._meta.concrete_fields if not f.primary_key}


def _values(model, values: dict, db) -> list:
    """Each value as its field prepares it; None is NULL for every field here (JSONField
    included: it stores None as SQL NULL), and a job row is mostly None, ~2 µs per field saved."""
    fields = _fields(model)
    return [None if value is None else fields[name].get_db_prep_save(value, db) for name, value in values.items()]


@cache
def _reader(model, names: tuple[str, ...], vendor: str) -> tuple[tuple[str, ...], list]:
    """`names` in the model's field order (what `Model.from_db` expects), each with the ORM's
    converters for its column on this vendor's database, and where the SELECT put it."""
    db = _db()
    ordered = tuple(f.attname for f in model._meta.concrete_fields if f.attname in names)
    fields = {f.attname: f for f in model._meta.concrete_fields}
    steps = []
    for name in ordered:
        column = fields[name].get_col(model._meta.db_table)
        converters = db.ops.get_db_converters(column) + column.get_db_converters(db)
        steps.append((names.index(name), column, converters))
    return ordered, steps


def row_read(model, names: tuple[str, ...], sql: str, params: list, flags: int = 0):
    """The first row of `sql` (selecting `names`, in order, then `flags` more columns, each true or
    false) as a `model` instance whose other fields are deferred, with the flags as booleans; or
    (None, ()) when there is no row."""
    return row_model(model, names, Sent(sql, params).row(), flags)


def row_model(model, names: tuple[str, ...], row: tuple | None, flags: int = 0):
    """`row_read` for a row read already."""
    if row is None:
        return None, ()
    db = _db()
    ordered, steps = _reader(model, names, db.vendor)
    values = []
    for position, column, converters in steps:
        value = row[position]
        for convert in converters:
            value = convert(value, column, db)
        values.append(value)
    return model.from_db(db.alias, ordered, values), tuple(bool(f) for f in row[len(names) :][:flags])


@cache
def _insert_sql(model, names: tuple[str, ...], conflict: tuple[str, ...], vendor: str) -> str:
    quote, fields = _db().ops.quote_name, _fields(model)
    columns = ", ".join(quote(fields[name].column) for name in names)
    target = f"({', '.join(quote(c) for c in conflict)}) " if conflict else ""  # "" = any (partitions)
    return (
        f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({', '.join(['%s'] * len(names))}) "
        f"ON CONFLICT {target}DO NOTHING RETURNING id"
    )


class Answered:
    """A statement's answer known without sending it (read as a `Sent`'s)."""

    __slots__ = ("_row",)

    def __init__(self, row: tuple | None):
        self._row = row

    def row(self):
        return self._row

    def close(self) -> None:
        pass


def row_insert(model, values: dict, conflict: tuple[str, ...]) -> int | None:
    """INSERT one row unless one with the same `conflict` columns exists; its id, or None."""
    return inserted_id(row_insert_send(model, values, conflict))


def row_insert_send(model, values: dict, conflict: tuple[str, ...]) -> Sent:
    db = _db()
    return Sent(_insert_sql(model, tuple(values), conflict, db.vendor), _values(model, values, db))


def inserted_id(sent: Sent | Answered) -> int | None:
    """What `row_insert` answers, for an INSERT sent by `row_insert_send`."""
    row = sent.row()
    return row[0] if row else None


@cache
def _update_sql(model, names: tuple[str, ...], vendor: str) -> str:
    quote, fields = _db().ops.quote_name, _fields(model)
    assignments = ", ".join(f"{quote(fields[name].column)} = %s" for name in names)
    return f"UPDATE {quote(model._meta.db_table)} SET {assignments} WHERE id = %s"


def row_update(model, pk: int, values: dict) -> None:
    db = _db()
    with _cursor(db) as cursor:
        cursor.execute(_update_sql(model, tuple(values), db.vendor), [*_values(model, values, db), pk])


def token_insert_send(issuer: str, jti: str, expires_at, used_for: str) -> Sent:
    """Remember a token's jti; its `inserted_id` is None when the token was already used (the
    row exists)."""
    values = {"issuer": issuer, "jti": jti, "expires_at": expires_at, "used_for": used_for}
    return row_insert_send(UsedToken, values, ("issuer", "jti"))


def job_insert(values: dict) -> int | None:
    """A new job row (every column given or defaulted), or None when its key exists already.
    Call inside a transaction: on a partitioned table the key's lock lasts until its commit."""
    return inserted_id(job_insert_send(values))


def job_insert_send(values: dict) -> Sent | Answered:
    """`job_insert`, its answer (`inserted_id`) read later."""
    now = timezone.now()
    row = {name: field.get_default() for name, field in _fields(JobRun).items()}
    row.update(values, updated_at=now)
    if not _partitioned(JobRun):
        return row_insert_send(JobRun, row, JOB_KEY)
    # Monthly partitions (manage.py partition_by_month, docs/scaling.md) hold no unique index on
    # the job's key alone: callbacks for one key take turns on an advisory lock, and the second
    # finds the first.
    key, db = [row[name] for name in JOB_KEY], _db()
    where = " AND ".join(f"{db.ops.quote_name(c)} = %s" for c in JOB_KEY)
    with db.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ["\x1f".join(map(str, key))])
        cursor.execute(f"SELECT 1 FROM relay_jobrun WHERE {where}", key)
        if cursor.fetchone() is not None:
            return Answered(None)
    return row_insert_send(JobRun, row, ())


_partitioned_tables: dict[str, bool] = {}


def _partitioned(model) -> bool:
    """Whether the model's table is partitioned, asked once per process and connection alias."""
    db = _db()
    if db.vendor != "postgresql":
        return False
    table = model._meta.db_table
    if table not in _partitioned_tables:
        with db.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_partitioned_table WHERE partrelid = to_regclass(%s)", [table])
            _partitioned_tables[table] = cursor.fetchone() is not None
    return _partitioned_tables[table]


def job_locked(key: dict) -> tuple[JobRun | None, bool]:
    """The job with this key, locked for the rest of the transaction (SQLite's write
    transaction holds the lock already), with only the columns the state machine reads; and
    whether it has failed tests stored (asked in the same statement: a completion then deletes
    them only when there are some, which is rare)."""
    return job_locked_read(job_locked_send(key))


def job_locked_send(key: dict) -> Sent:
    return Sent(_job_locked_sql(_db().vendor), [key[c] for c in JOB_KEY])


def job_locked_read(sent: Sent) -> tuple[JobRun | None, bool]:
    """What `job_locked` answers, for a lock sent by `job_locked_send`."""
    job, flags = row_model(JobRun, JOB_STATE_COLUMNS, sent.row(), flags=1)
    return job, bool(flags and flags[0])


@cache
def _job_locked_sql(vendor: str) -> str:
    db = _db()
    lock = " FOR UPDATE" if db.features.has_select_for_update else ""
    where = " AND ".join(f"j.{db.ops.quote_name(c)} = %s" for c in JOB_KEY)
    return (
        f"SELECT {', '.join('j.' + name for name in JOB_STATE_COLUMNS)}, "
        "EXISTS (SELECT 1 FROM relay_failedtest f WHERE f.job_run_id = j.id) "
        f"FROM relay_jobrun j WHERE {where}{lock}"
    )


def job_update(pk: int, values: dict) -> None:
    row_update(JobRun, pk, {**values, "updated_at": timezone.now()})


def never_started_drop(dispatch_id: int) -> None:
    """A run did start after all: the sweeper's "never started" stand-in row for it goes, with
    what refers to it (the ORM's cascade). Callers ask `dispatch_answered` whether there is one."""
    JobRun.objects.filter(dispatch_id=dispatch_id, ended_by=JobRun.EndedBy.NEVER_STARTED).delete()


FAILED_TESTS_PER_STATEMENT = 500
"""Rows per INSERT: 10 columns each stays far below SQLite's 32,766 and PostgreSQL's 65,535
parameters; a callback carries at most 1,000 failed tests."""


def failed_tests_insert(job_id: int, tests: list[dict]) -> None:
    """The job's failed tests (each a dict of FailedTest's columns but job_run_id), in multi-row
    INSERTs: the ORM's bulk_create cost a job with three failed tests as much as its job row."""
    if not tests:
        return
    names, fields, db = ("job_run_id", *tests[0]), _fields(FailedTest), _db()
    columns = ", ".join(db.ops.quote_name(fields[name].column) for name in names)
    for start in range(0, len(tests), FAILED_TESTS_PER_STATEMENT):
        chunk = tests[start : start + FAILED_TESTS_PER_STATEMENT]
        rows = ", ".join([f"({', '.join(['%s'] * len(names))})"] * len(chunk))
        params = [
            fields[name].get_db_prep_save(value, db)
            for test in chunk
            for name, value in (("job_run_id", job_id), *test.items())
        ]
        with db.cursor() as cursor:
            cursor.execute(f"INSERT INTO relay_failedtest ({columns}) VALUES {rows}", params)


def failed_tests_drop(job_id: int) -> None:
    with _db().cursor() as cursor:
        cursor.execute("DELETE FROM relay_failedtest WHERE job_run_id = %s", [job_id])


DISPATCH_ANSWERED_SQL = (
    f"SELECT {', '.join('d.' + name for name in DISPATCH_COLUMNS)}, "
    "EXISTS (SELECT 1 FROM relay_jobrun j WHERE j.dispatch_id = d.id AND j.ended_by = %s) "
    "FROM relay_dispatch d JOIN relay_delivery v ON v.id = d.delivery_id "
    "WHERE v.guid = %s AND d.project_id = %s"
)


def dispatch_answered(delivery_guid: str, project_id: int) -> Dispatch | None:
    """The dispatch of this delivery to this project, without the delivery's payload (20 KB of
    JSON a callback never reads). Its `never_started_row` says whether the sweeper has written a
    "never started" row for it (nearly never: asked in the same statement, through the job
    table's dispatch index). The sweeper writes one only for a dispatch no job answered, so a
    race with it is no wider than the one the callback's own transaction already has."""
    params = [JobRun.EndedBy.NEVER_STARTED.value, delivery_guid, project_id]
    dispatch, flags = row_read(Dispatch, DISPATCH_COLUMNS, DISPATCH_ANSWERED_SQL, params, flags=1)
    if dispatch is not None:
        dispatch.never_started_row = flags[0]
    return dispatch
