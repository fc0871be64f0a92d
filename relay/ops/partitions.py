"""Monthly partitions for the tables that grow with traffic: job runs, dispatches and the test
store's outcomes (PostgreSQL declarative partitioning, RANGE on created_at). See docs/scaling.md.

A partitioned table's primary key and unique constraints must contain the partition key, and a
foreign key can only point at a unique key, so converting a table:

- makes its primary key (id, created_at) and appends created_at to each unique constraint or
  unique index (job_run_key_unique, dispatch_once_per_project): they still serve lookups, but no
  longer prove that a key is stored once across months (the relay's callback insert must then
  serialise on the key instead: docs/scaling.md, "What the relay's statements need");
- drops the foreign keys that point at it (failed tests, issue occurrences, dispatch attempts,
  a job's dispatch): Django deletes children itself, and their indexes stay;
- keeps its other indexes under their names (later migrations find them), its checks, its
  foreign keys to unpartitioned tables, and its id sequence (a plain sequence: PostgreSQL 15
  has no identity column on a partitioned table).

A converted table gets a partition per month from its oldest row to `ahead` months past now,
and a default partition so no write ever fails for want of one; running again only adds the
months that came into range (cheap: run it monthly)."""

from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from django.db import connection, transaction

TABLES = ("relay_dispatch", "relay_jobrun", "relay_testrun")
"""Dispatches first: a job points at its dispatch, a test run at its job."""
KEY = "created_at"
AHEAD_MONTHS = 3


class NotPostgres(Exception):
    pass


@dataclass
class PartitionPlan:
    table: str
    convert: bool
    statements: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def plans(ahead: int = AHEAD_MONTHS, now: datetime | None = None) -> list[PartitionPlan]:
    if connection.vendor != "postgresql":
        raise NotPostgres(
            f"partition_by_month needs PostgreSQL (declarative partitioning); this database is {connection.vendor}. "
            "SQLite stores stay one file: nothing to convert."
        )
    now = now or datetime.now(UTC)
    with connection.cursor() as cursor:
        return [_plan(cursor, table, ahead, now) for table in TABLES]


def apply(plan_list: list[PartitionPlan]) -> None:
    """Every statement of every plan in one transaction: a failure leaves the tables as they were."""
    with transaction.atomic(), connection.cursor() as cursor:
        for plan in plan_list:
            for sql in plan.statements:
                cursor.execute(sql)


def _plan(cursor, table: str, ahead: int, now: datetime) -> PartitionPlan:
    partitioned = _is_partitioned(cursor, table)
    plan = PartitionPlan(table, convert=not partitioned)
    this_month = date(now.year, now.month, 1)
    if partitioned:
        existing = _partitions(cursor, table)
        months = _months(this_month, _add_months(this_month, ahead))
        plan.statements = [_partition_sql(table, m) for m in months if _partition_name(table, m) not in existing]
        return plan
    oldest = _oldest(cursor, table) or now
    _convert(cursor, plan, _months(min(date(oldest.year, oldest.month, 1), this_month), _add_months(this_month, ahead)))
    return plan


def _convert(cursor, plan: PartitionPlan, months: list[date]) -> None:
    table, old = plan.table, f"{plan.table}_unpartitioned"
    constraints, indexes, inbound = _constraints(cursor, table), _plain_indexes(cursor, table), _inbound(cursor, table)
    plan.statements = [
        f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE",
        f"ALTER TABLE {table} RENAME TO {old}",
        f"CREATE TABLE {table} (LIKE {old} INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE) "
        f"PARTITION BY RANGE ({KEY})",
        *(_partition_sql(table, m) for m in months),
        f"CREATE TABLE {table}_pdefault PARTITION OF {table} DEFAULT",
        f"INSERT INTO {table} SELECT * FROM {old}",
        f"CREATE SEQUENCE {table}_id_part_seq OWNED BY {table}.id",
        f"SELECT setval('{table}_id_part_seq', (SELECT COALESCE(MAX(id), 0) + 1 FROM {old}), false)",
        f"DROP TABLE {old} CASCADE",
        f"ALTER SEQUENCE {table}_id_part_seq RENAME TO {table}_id_seq",
        f"ALTER TABLE {table} ALTER COLUMN id SET DEFAULT nextval('{table}_id_seq')",
    ]
    for name, kind, definition, target in constraints:
        if kind in "pu":
            plan.statements.append(f"ALTER TABLE {table} ADD CONSTRAINT {name} {_with_key(definition)}")
            plan.notes.append(f"{name}: {definition} becomes {_with_key(definition)}")
        elif kind == "f" and target not in TABLES:
            plan.statements.append(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")
        elif kind == "f":
            plan.notes.append(f"{name} ({definition}) goes: {target} is partitioned too")
    for _name, definition, unique in indexes:
        plan.statements.append(_with_key(definition) if unique else definition)
    plan.notes += [
        f"{name} on {child} goes: a foreign key cannot point at {table}(id) any more" for child, name in inbound
    ]
    plan.statements.append(f"ANALYZE {table}")


def _with_key(definition: str) -> str:
    """`… (a, b)` or `… (a, b) WHERE …` with the partition key appended to the column list."""
    head, _, rest = definition.partition(")")
    return f"{head}, {KEY}){rest}" if KEY not in head.split("(", 1)[-1] else definition


def _is_partitioned(cursor, table: str) -> bool:
    cursor.execute("SELECT 1 FROM pg_partitioned_table WHERE partrelid = %s::regclass", [table])
    return cursor.fetchone() is not None


def _partitions(cursor, table: str) -> set[str]:
    cursor.execute("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = %s::regclass", [table])
    return {row[0] for row in cursor.fetchall()}


def _oldest(cursor, table: str):
    cursor.execute(f"SELECT MIN({KEY}) FROM {table}")
    return cursor.fetchone()[0]


def _constraints(cursor, table: str) -> list[tuple]:
    """(name, kind p/u/f, definition, referenced table) of the table's keys, outbound first."""
    cursor.execute(
        "SELECT conname, contype, pg_get_constraintdef(oid), confrelid::regclass::text FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND contype IN ('p', 'u', 'f') ORDER BY contype, conname",
        [table],
    )
    return cursor.fetchall()


def _plain_indexes(cursor, table: str) -> list[tuple]:
    """(name, CREATE INDEX …, unique) of indexes that no constraint owns."""
    cursor.execute(
        "SELECT i.relname, pg_get_indexdef(x.indexrelid), x.indisunique FROM pg_index x "
        "JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = %s::regclass "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid) ORDER BY i.relname",
        [table],
    )
    return cursor.fetchall()


def _inbound(cursor, table: str) -> list[tuple]:
    cursor.execute(
        "SELECT conrelid::regclass::text, conname FROM pg_constraint WHERE confrelid = %s::regclass AND contype = 'f' "
        "ORDER BY 1, 2",
        [table],
    )
    return cursor.fetchall()


def _partition_name(table: str, month: date) -> str:
    return f"{table}_p{month:%Y%m}"


def _partition_sql(table: str, month: date) -> str:
    return (
        f"CREATE TABLE {_partition_name(table, month)} PARTITION OF {table} "
        f"FOR VALUES FROM ('{month:%Y-%m-%d} 00:00:00+00') TO ('{_add_months(month, 1):%Y-%m-%d} 00:00:00+00')"
    )


def _months(first: date, last: date) -> list[date]:
    months = [first]
    while months[-1] < last:
        months.append(_add_months(months[-1], 1))
    return months


def _add_months(month: date, n: int) -> date:
    index = month.year * 12 + month.month - 1 + n
    return date(index // 12, index % 12 + 1, 1)
