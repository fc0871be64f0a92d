"""The callback's statements, one per state change, written out once from the models' fields.

Every callback is a few small writes (the token's jti, the job row, its failed tests), and with
Django's query compiler in between, compiling them cost more CPU than the database spent running
them (docs/performance.md, "Callbacks"). So the hot statements are plain SQL, built once per
model from its concrete fields, with every value prepared by its own field
(`get_db_prep_save`: JSON, datetimes and booleans come out exactly as the ORM writes them), on
SQLite and PostgreSQL alike (both have `INSERT … ON CONFLICT DO NOTHING … RETURNING` and
`UPDATE … RETURNING`). A read gives model instances through the ORM's own converters and
`Model.from_db` (what `Model.objects.raw` does, at a fifth of its cost). Each statement's text is
built once per model, columns and database vendor, and each call reads the connection once: every
attribute read through `django.db.connection` is a lookup in a context-local, about seventy per
callback when the values were prepared through it.

A job's state change is a `Change`: one statement that writes the row only where the change
applies and answers the row as written, or nothing. On PostgreSQL the common callback (a new
in_progress row, an in_progress row completed) is that statement together with the token's jti
in one statement of its own transaction (`change_with_token`); everything else runs the same
statements inside the caller's transaction (relay/callbacks/receive.py).

On PostgreSQL these statements are also prepared on the server (`_cursor`): Django's own cursors
bind values on the client, so each statement reached the server as new text, parsed and planned
again for every callback (docs/performance.md, "Callbacks, 2026-12-04 (later)")."""

import json
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, transaction
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import BooleanField, CharField, Field, IntegerField, JSONField, TextField
from django.utils import timezone
from psycopg.types.json import Jsonb

from ..inputs import jsonin
from ..models import Dispatch, FailedTest, JobRun, RerunRequest, UsedToken

JOB_KEY = ("delivery_key", "project_id", "run_id", "run_attempt", "job_name")
"""The columns of JobRun's `job_run_key_unique`: one row per (delivery, repo, run, attempt, job)."""
JOB_STATE_COLUMNS = ("id", "status", "conclusion", "ended_by", "event_type", "pr_number")
"""What a callback reads of a job row: its state, and what decides the reactions to it
(relay.follow_up.RecordedJob)."""
DISPATCH_COLUMNS = ("id", "delivery_id", "project_id", "state", "event_type", "pr_number", "head_sha", "sent_at")
"""What a callback reads of the dispatch it answers."""
COMPLETABLE = "NOT (status = 'completed' AND ended_by = '')"
"""The rows a completion may change: one in progress, or one the sweeper ended (`ended_by`: timed
out, never started, superseded). A row a real completion ended is final (receive.py answers
`duplicate` or 409 for it)."""
NAMED_DISPATCH = "relay_dispatch d JOIN relay_delivery v ON v.id = d.delivery_id"
NAMED_DISPATCH_WHERE = "v.guid = %s AND d.project_id = %s"
"""The dispatch `d` a callback names: its delivery's GUID (the callback's delivery_id) and the
project that calls (the parameters, in that order)."""
NEVER_STARTED_ROW = (
    # A literal, not a parameter: a prepared statement's generic plan could not use the partial
    # index jobrun_never_started_idx for a value it does not know.
    f"EXISTS (SELECT 1 FROM relay_jobrun j WHERE j.dispatch_id = d.id AND j.ended_by = '{JobRun.EndedBy.NEVER_STARTED}')"
)
"""Whether the sweeper has written its "never started" stand-in row for the dispatch `d`."""
ELAPSED_SECONDS = {
    # Both ends in a row of their own, each named once: a NULL end gives no row, and so NULL
    # (GREATEST alone would skip the NULL and answer 0).
    "postgresql": "(SELECT ROUND(GREATEST(0, EXTRACT(EPOCH FROM (e - s)))::numeric, 3) "
    "FROM (SELECT CAST(%s AS timestamp with time zone) AS e, {start} AS s) AS elapsed "
    "WHERE e IS NOT NULL AND s IS NOT NULL)",
    # Django registers django_timestamp_diff (microseconds) on every SQLite connection; a NULL
    # start makes it, and so MAX and ROUND, NULL.
    "sqlite": "ROUND(MAX(0, django_timestamp_diff(%s, {start}) / 1000000.0), 3)",
}
"""Seconds from the timestamp `{start}` to the one given (%s), on the relay's clock, to the
millisecond, never negative; unknown (NULL) without either. A job's execution_seconds (from its
in_progress_at to its completion) and queue_seconds (QUEUE_START to its in_progress) are both
this, each computed by the statement that writes it."""


def _db():
    """The default connection itself, read once per statement (see the module docstring)."""
    return connections[DEFAULT_DB_ALIAS]


def _cursor(db):
    """A cursor for one of the hot statements below: on PostgreSQL one whose statements the server
    prepares (crcr/postgresql: `prepared_cursor`), elsewhere Django's (Python's sqlite3 keeps its
    own statement cache)."""
    prepared = getattr(db, "prepared_cursor", None)
    return prepared() if prepared is not None else db.cursor()


def _first_row(sql: str, params: list):
    """The statement's first row, or None."""
    with _cursor(_db()) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


@cache
def _fields(model) -> dict:
    return {f.attname: f for f in model._meta.concrete_fields if not f.primary_key}


def _values(model, values: dict, db) -> list:
    """Each value as its field prepares it; None is NULL for every field here (JSONField
    included: it stores None as SQL NULL), and a job row is mostly None, ~2 µs per field saved;
    a value its field would store unchanged (`_stored_as_is`) is not passed through the field at
    all, and one datetime in several columns of the same kind (a statement's `now`: created, in
    progress, updated) is prepared once (~4 µs each on SQLite)."""
    fields, as_is, json_columns = _fields(model), _stored_as_is(model, db.vendor), _json_columns(model)
    prepared, times = [], {}
    for name, value in values.items():
        if value is None or type(value) is as_is.get(name):
            prepared.append(value)
        elif name in json_columns and type(value) in (dict, list):
            prepared.append(_json_prepared(value, db))
        elif type(value) is datetime:
            field = fields[name]
            if (type(field), value) not in times:
                times[type(field), value] = field.get_db_prep_save(value, db)
            prepared.append(times[type(field), value])
        else:
            prepared.append(fields[name].get_db_prep_save(value, db))
    return prepared


def _prepared(field, value, db):
    """`field.get_db_prep_save(value, db)`, skipped where it would answer the value itself."""
    as_is = _stored_as_is(field.model, db.vendor)
    return value if value is None or type(value) is as_is.get(field.attname) else field.get_db_prep_save(value, db)


@cache
def _stored_as_is(model, vendor: str) -> dict[str, type]:
    """{field name: the one type of value the field prepares as the value itself}: Django's own
    preparation of a str for a CharField or TextField (`to_python` answers it as it is) and of a
    bool for a BooleanField, and of an int for an integer field where the database's operations
    adapt no integer (SQLite; PostgreSQL's wrap each in psycopg's sized type). A field that
    overrides any step of the preparation is not among them. The job row's statements pass ~30
    values each, most of them strings."""
    db, plain = _db(), {}
    base_adapts_ints = type(db.ops).adapt_integerfield_value is BaseDatabaseOperations.adapt_integerfield_value
    for name, field in _fields(model).items():
        kind = _AS_IS.get(type(field).get_prep_value)
        steps_own = type(field).get_db_prep_save is Field.get_db_prep_save
        steps_own = steps_own and type(field).get_db_prep_value in (
            Field.get_db_prep_value,
            *((IntegerField.get_db_prep_value,) if base_adapts_ints else ()),
        )
        if kind is not None and steps_own and type(field).to_python is _TO_PYTHON[kind]:
            plain[name] = kind
    return plain


@cache
def _json_columns(model) -> frozenset[str]:
    """The model's JSONFields that prepare a value as Django's own JSONField does with json's
    encoder (no `encoder` of their own, no step of the preparation overridden): `_json_prepared`
    writes those."""
    stock = ("get_db_prep_save", "get_db_prep_value", "get_prep_value")
    return frozenset(
        name
        for name, field in _fields(model).items()
        if type(field) is JSONField
        and field.encoder is None
        and all(getattr(type(field), step) is getattr(JSONField, step) for step in stock)
    )


def _json_prepared(value: dict | list, db):
    """A JSON column's value as `JSONField.get_db_prep_save` prepares it (`db.ops.adapt_json_value`:
    JSON text on SQLite, a Jsonb on PostgreSQL), encoded by orjson: a stored callback body is
    ~1 KB, 6 µs through json.dumps against 0.5 µs; one counting 1,100 modules 0.42 ms against
    0.03 ms. What orjson would write otherwise than json (a datetime, a dataclass, a subclass of
    str or dict) or not at all (an integer past 64 bits, a lone surrogate) goes to json."""
    if db.vendor == "postgresql":
        return Jsonb(value, dumps=_json_text)
    return _json_text(value)


def _json_text(value) -> str:
    return jsonin.encoded(value, _django_json).decode()


def _django_json(value) -> bytes:
    """What Django's JSONField writes (json.dumps, its defaults)."""
    return json.dumps(value).encode()


_AS_IS = {
    CharField.get_prep_value: str,
    TextField.get_prep_value: str,
    BooleanField.get_prep_value: bool,
    IntegerField.get_prep_value: int,
}
_TO_PYTHON = {str: CharField.to_python, bool: BooleanField.to_python, int: IntegerField.to_python}


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
    return row_model(model, names, _first_row(sql, params), flags)


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


def _quoted(model, names) -> str:
    quote, fields = _db().ops.quote_name, _fields(model)
    return ", ".join(quote(fields[name].column) for name in names)


@cache
def _insert_sql(model, names: tuple[str, ...], conflict: tuple[str, ...], returning: str, vendor: str) -> str:
    target = f"({_quoted(model, conflict)}) " if conflict else ""  # "" = any (partitions)
    return (
        f"INSERT INTO {_db().ops.quote_name(model._meta.db_table)} ({_quoted(model, names)}) "
        f"VALUES ({', '.join(['%s'] * len(names))}) ON CONFLICT {target}DO NOTHING RETURNING {returning}"
    )


# --- the token ------------------------------------------------------------------------------------


def token_insert(values: dict) -> bool:
    """Remember a token's jti (UsedToken's columns); False when the token was used already (the
    row exists)."""
    db = _db()
    sql = _insert_sql(UsedToken, tuple(values), ("issuer", "jti"), "id", db.vendor)
    return _first_row(sql, _values(UsedToken, values, db)) is not None


# --- the job row's changes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One statement that changes a job row where the change applies and answers the row as
    written (JOB_STATE_COLUMNS, then whether it had failed tests before), or no row."""

    sql: str
    params: list
    key: tuple
    """The job's key, in JOB_KEY's order."""
    inserts: bool
    """A new row (else a completion of an existing one, whose old failed tests go)."""


def job_insert_change(values: dict, made_from: "FromDispatch | None" = None) -> Change:
    """A new job row (every column given or defaulted), unless its key exists already; a row
    `made_from` a dispatch takes that dispatch's columns (FROM_DISPATCH) in the same statement,
    and is not written when the dispatch is not found."""
    now = timezone.now()
    row = {name: field.get_default() for name, field in _fields(JobRun).items()}
    row.update(values, updated_at=now)
    db = _db()
    conflict = () if _partitioned(JobRun) else JOB_KEY
    key = tuple(row[name] for name in JOB_KEY)
    if made_from is None:
        sql = _insert_sql(JobRun, tuple(row), conflict, _state_returned(False), db.vendor)
        return Change(sql, _values(JobRun, row, db), key, inserts=True)
    row = {name: value for name, value in row.items() if name not in FROM_DISPATCH}
    sql = _insert_from_dispatch_sql(tuple(row), conflict, made_from.shape(), db.vendor)
    values = _values(JobRun, row, db)
    return Change(sql, [*values, *made_from.params(values[list(row).index("in_progress_at")])], key, inserts=True)


@dataclass(frozen=True)
class FromDispatch:
    """The dispatch a new job row is made from, found by the row's own statement: by its `id`
    once looked up, or else by the delivery and project the callback names (and the PR and head
    SHA its callback_token binds, when it echoed one) while the sweeper has no "never started" row
    for it (which a new row must end: the caller's transaction does, the dispatch looked up). The
    row's queue time starts at the dispatch's sending, or a re-run's request (`rerun_of`, a run id)."""

    id: int | None = None
    delivery_guid: str = ""
    project_id: int | None = None
    bound: tuple | None = None
    """(pr_number, head_sha) of the callback_token; None without one."""
    rerun_of: str | None = None

    def shape(self) -> tuple:
        return ("id" if self.id is not None else "bound" if self.bound else "named", self.rerun_of is not None)

    def params(self, in_progress_at) -> list:
        """The statement's parameters after the row's own (`in_progress_at` as prepared among
        them): its queue time's, then its WHERE's."""
        queue = [in_progress_at, *([self.rerun_of] if self.rerun_of is not None else [])]
        if self.id is not None:
            return [*queue, self.id]
        return [*queue, self.delivery_guid, self.project_id, *(self.bound or ())]


FROM_DISPATCH = {
    "dispatch_id": "d.id",
    "pr_number": "d.pr_number",
    "head_sha": "d.head_sha",
    "event_type": "d.event_type",  # never the report's: a probe's dispatch says `bisect`, a PR's `pull_request`
    "queue_seconds": None,  # ELAPSED_SECONDS from QUEUE_START to in_progress_at
}
"""What a job row made from a dispatch takes from it: the dispatch's PR and head SHA are the
truth, not the report's echo."""
QUEUE_START = {
    False: "d.sent_at",
    # A re-run attempt is measured from the relay's re-run request when it made one, and is
    # otherwise left unknown rather than measured from the original dispatch (days earlier, maybe).
    True: f"(SELECT MAX(r.requested_at) FROM {RerunRequest._meta.db_table} r WHERE r.project_id = d.project_id AND r.run_id = %s)",
}
"""Where a job's queue time starts, by whether it is a re-run's (run_attempt > 1)."""


@cache
def _insert_from_dispatch_sql(names: tuple[str, ...], conflict: tuple[str, ...], shape: tuple, vendor: str) -> str:
    finds, rerun = shape
    quote = _db().ops.quote_name
    columns = {**FROM_DISPATCH, "queue_seconds": ELAPSED_SECONDS[vendor].format(start=QUEUE_START[rerun])}
    if finds == "id":
        source, where = "relay_dispatch d", "d.id = %s"
    else:
        source, where = NAMED_DISPATCH, f"{NAMED_DISPATCH_WHERE} AND NOT {NEVER_STARTED_ROW}"
    if finds == "bound":
        where += f" AND d.pr_number {SAME_AS[vendor]} %s AND d.head_sha = %s"
    target = f"({_quoted(JobRun, conflict)}) " if conflict else ""
    return (
        f"INSERT INTO {quote(JobRun._meta.db_table)} ({_quoted(JobRun, names)}, {', '.join(columns)}) "
        f"SELECT {', '.join(['%s'] * len(names))}, {', '.join(columns.values())} "
        f"FROM {source} WHERE {where} ON CONFLICT {target}DO NOTHING RETURNING {_state_returned(False)}"
    )


def job_complete_change(key: dict, values: dict, kept: tuple[str, ...], now, made_for: str, expected: dict) -> Change:
    """The completion of the job with this key where it is COMPLETABLE: `values` written, but a
    column in `kept` whose value is None keeps what the row holds; `completed_at` and
    `execution_seconds` from `now`. Only a row `made_for` a "dispatch" (or a "self-report": no
    dispatch), and only one whose columns hold the `expected` values (NULL matching None)."""
    db = _db()
    values = {**values, "completed_at": now, "updated_at": now}
    sql = _complete_sql(tuple(values), kept, made_for, tuple(expected), db.vendor)
    prepared = _values(JobRun, values, db)
    completed_at = prepared[list(values).index("completed_at")]
    where = [*(key[name] for name in JOB_KEY), *_values(JobRun, expected, db)]
    return Change(sql, [*prepared, completed_at, *where], tuple(key[n] for n in JOB_KEY), False)


MADE_FOR = {"dispatch": "dispatch_id IS NOT NULL", "self-report": "dispatch_id IS NULL"}
"""Which rows a completion may find, by what made them: a dispatch's callback completes only a row
made for a dispatch (of the delivery and project its key holds), a self-report only one of its own."""


SAME_AS = {"postgresql": "IS NOT DISTINCT FROM", "sqlite": "IS"}
"""Equality that takes NULL as equal to NULL."""


@cache
def _complete_sql(
    names: tuple[str, ...], kept: tuple[str, ...], made_for: str, expected: tuple[str, ...], vendor: str
) -> str:
    quote, fields = _db().ops.quote_name, _fields(JobRun)
    assignments = []
    for name in names:
        column = quote(fields[name].column)
        assignments.append(f"{column} = COALESCE(%s, {column})" if name in kept else f"{column} = %s")
    assignments.append(f"execution_seconds = {ELAPSED_SECONDS[vendor].format(start='in_progress_at')}")
    where = [f"{quote(c)} = %s" for c in JOB_KEY] + [COMPLETABLE, MADE_FOR[made_for]]
    where += [f"{quote(fields[name].column)} {SAME_AS[vendor]} %s" for name in expected]
    return (
        f"UPDATE {quote(JobRun._meta.db_table)} SET {', '.join(assignments)} WHERE {' AND '.join(where)} "
        f"RETURNING {_state_returned(True)}"
    )


def _state_returned(may_have_failed_tests: bool) -> str:
    had = "EXISTS (SELECT 1 FROM relay_failedtest f WHERE f.job_run_id = relay_jobrun.id)"
    return f"{', '.join(JOB_STATE_COLUMNS)}, {had if may_have_failed_tests else 'FALSE'} AS had_failed_tests"


def change_apply(change: Change) -> tuple[JobRun | None, bool]:
    """Run `change` in the caller's transaction: the row as written, and whether it had failed
    tests (which the caller replaces); (None, False) when the change did not apply."""
    # Monthly partitions (manage.py partition_by_month, docs/scaling.md) hold no unique index on the
    # job's key alone: inserts of one key take turns on an advisory lock (held until the caller's
    # commit), and the second finds the first.
    if change.inserts and _partitioned(JobRun) and _key_taken(change.key):
        return None, False
    job, flags = row_model(JobRun, JOB_STATE_COLUMNS, _first_row(change.sql, change.params), flags=1)
    return job, bool(flags and flags[0])


def _key_taken(key: tuple) -> bool:
    db = _db()
    where = " AND ".join(f"{db.ops.quote_name(c)} = %s" for c in JOB_KEY)
    with db.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ["\x1f".join(map(str, key))])
        cursor.execute(f"SELECT 1 FROM relay_jobrun WHERE {where}", list(key))
        return cursor.fetchone() is not None


def one_statement_changes() -> bool:
    """Whether `change_with_token` can run here: PostgreSQL (SQLite has no INSERT or UPDATE inside
    WITH), and a job table that holds its key unique."""
    return _db().vendor == "postgresql" and not _partitioned(JobRun)


def change_with_token(change: Change, token: dict, failed_tests: list[dict]) -> JobRun | None:
    """`change`, the report's failed tests (each a dict of FailedTest's columns but job_run_id)
    and the token's jti (UsedToken's columns) in one statement, its own transaction when the
    caller has none: the row as written, or None when the change did not apply or the token was
    used already, and then nothing was written. The jti is written only with the change (so a
    token is consumed with a state change, never without), and its unique index refuses a used
    token: the error undoes the whole statement, the change with it. A completed row's old failed
    tests go in the same statement; the new ones come one array per column, so the statement's
    text (and its prepared plan) is the same whatever their number."""
    db, names = _db(), tuple(failed_tests[0]) if failed_tests else ()
    sql = _with_token_sql(change.sql, tuple(token), change.inserts, names)
    params = [*change.params, *_failed_tests_arrays(failed_tests, names, db), *_values(UsedToken, token, db)]
    # Inside a caller's transaction (a test's) a refused token must not break it: a savepoint.
    try:
        with transaction.atomic() if db.in_atomic_block else nullcontext():
            row = _first_row(sql, params)
    except IntegrityError:
        # The used token's unique index, or any other constraint (a foreign key checked at
        # commit): nothing was written either way, and the caller's transaction, running the
        # same change, meets a lasting error again and raises it.
        return None
    return row_model(JobRun, JOB_STATE_COLUMNS, row)[0]


def _failed_tests_arrays(tests: list[dict], names: tuple[str, ...], db) -> list[list]:
    fields = _fields(FailedTest)
    return [[_prepared(fields[name], test[name], db) for test in tests] for name in names]


@cache
def _with_token_sql(change_sql: str, token_names: tuple[str, ...], inserts: bool, failed_test_names: tuple) -> str:
    db, fields = _db(), _fields(FailedTest)
    parts = [f"j AS ({change_sql})"]
    if not inserts:
        # The change asked already whether the row had failed tests: no second probe when it had none.
        parts.append(
            "d AS (DELETE FROM relay_failedtest WHERE job_run_id IN (SELECT id FROM j WHERE had_failed_tests))"
        )
    if failed_test_names:
        arrays = ", ".join(f"%s::{fields[name].db_type(db)}[]" for name in failed_test_names)
        parts.append(
            f"f AS (INSERT INTO relay_failedtest ({_quoted(FailedTest, ('job_run_id', *failed_test_names))}) "
            f"SELECT j.id, u.* FROM j, unnest({arrays}) AS u)"
        )
    parts.append(
        f"t AS (INSERT INTO {db.ops.quote_name(UsedToken._meta.db_table)} ({_quoted(UsedToken, token_names)}) "
        f"SELECT {', '.join(['%s'] * len(token_names))} WHERE EXISTS (SELECT 1 FROM j))"
    )
    return f"WITH {', '.join(parts)} SELECT {', '.join(JOB_STATE_COLUMNS)} FROM j"


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


def job_locked(key: dict) -> JobRun | None:
    """The job with this key, locked for the rest of the transaction (SQLite's write transaction
    holds the lock already), with only the columns the state machine reads."""
    return row_read(JobRun, JOB_STATE_COLUMNS, _job_locked_sql(_db().vendor), [key[c] for c in JOB_KEY])[0]


@cache
def _job_locked_sql(vendor: str) -> str:
    db = _db()
    lock = " FOR UPDATE" if db.features.has_select_for_update else ""
    where = " AND ".join(f"{db.ops.quote_name(c)} = %s" for c in JOB_KEY)
    return f"SELECT {', '.join(JOB_STATE_COLUMNS)} FROM relay_jobrun WHERE {where}{lock}"


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
    columns = _quoted(FailedTest, names)
    for start in range(0, len(tests), FAILED_TESTS_PER_STATEMENT):
        chunk = tests[start : start + FAILED_TESTS_PER_STATEMENT]
        rows = ", ".join([f"({', '.join(['%s'] * len(names))})"] * len(chunk))
        params = [
            _prepared(fields[name], value, db)
            for test in chunk
            for name, value in (("job_run_id", job_id), *test.items())
        ]
        with db.cursor() as cursor:
            cursor.execute(f"INSERT INTO relay_failedtest ({columns}) VALUES {rows}", params)


def failed_tests_drop(job_id: int) -> None:
    with _db().cursor() as cursor:
        cursor.execute("DELETE FROM relay_failedtest WHERE job_run_id = %s", [job_id])


DISPATCH_ANSWERED_SQL = (
    f"SELECT {', '.join('d.' + name for name in DISPATCH_COLUMNS)}, {NEVER_STARTED_ROW} "
    f"FROM {NAMED_DISPATCH} WHERE {NAMED_DISPATCH_WHERE}"
)


def dispatch_answered(delivery_guid: str, project_id: int) -> Dispatch | None:
    """The dispatch of this delivery to this project, without the delivery's payload (20 KB of
    JSON a callback never reads). Its `never_started_row` says whether the sweeper has written a
    "never started" row for it (nearly never: asked in the same statement, through the job
    table's dispatch index). The sweeper writes one only for a dispatch no job answered, so a
    race with it is no wider than the one the callback's own transaction already has."""
    dispatch, flags = row_read(Dispatch, DISPATCH_COLUMNS, DISPATCH_ANSWERED_SQL, [delivery_guid, project_id], flags=1)
    if dispatch is not None:
        dispatch.never_started_row = flags[0]
    return dispatch
