"""`manage.py partition_by_month`: the procedure of docs/scaling.md, run on a throwaway PostgreSQL
database seeded by bench_seed (PostgreSQL runs only; SQLite runs check the refusal)."""

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

ROOT = Path(__file__).resolve().parents[3]
TABLES = ("relay_jobrun", "relay_dispatch", "relay_failedtest", "relay_delivery")

postgres_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="partitioning is PostgreSQL's")


@pytest.mark.skipif(connection.vendor != "sqlite", reason="the refusal is for SQLite")
def test_it_refuses_sqlite_with_a_clear_message(db):
    with pytest.raises(CommandError, match="needs PostgreSQL"):
        call_command("partition_by_month", "--apply")


@pytest.fixture
def throwaway():
    """A fresh database beside the test database, migrated and seeded; dropped afterwards."""
    import psycopg

    settings = connection.settings_dict
    name = f"crcr_partition_{uuid.uuid4().hex[:10]}"
    server = {"host": settings["HOST"], "port": settings["PORT"] or 5432, "user": settings["USER"]}
    url = f"postgres://{settings['USER']}@{settings['HOST']}:{settings['PORT'] or 5432}/{name}"
    with psycopg.connect(dbname="postgres", autocommit=True, password=settings["PASSWORD"] or None, **server) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        manage(url, "migrate", "-v0")
        manage(url, "bench_seed", "--jobs", "3000", "--reset")
        yield url, lambda sql: query(url, sql)
    finally:
        with psycopg.connect(
            dbname="postgres", autocommit=True, password=settings["PASSWORD"] or None, **server
        ) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def manage(url: str, *args: str) -> str:
    env = {**os.environ, "DATABASE_URL": url, "CRCR_SANDBOX": "0", "SECRET_KEY": "partition-test-" + "k" * 50}
    env.pop("REDIS_URL", None)  # the throwaway store has no cache of its own
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def query(url: str, sql: str) -> list:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def counts(run) -> dict:
    return {table: run(f"SELECT COUNT(*) FROM {table}")[0][0] for table in TABLES}


RELAY_WRITES_AND_READS = """
import json, django
django.setup()
from django.test import Client
from django.test.utils import setup_test_environment
from django.utils import timezone
from relay.callbacks import job_rows
from relay.models import Delivery, Dispatch, FailedTest, JobRun, Project
from django.test.utils import override_settings
setup_test_environment()
override_settings(STORAGES={"staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}}).enable()
project = Project.objects.filter(level="L2").first()
delivery = Delivery.objects.order_by("-id").first()
dispatch = Dispatch.objects.create(delivery=delivery, project=project, state="sent", event_type="push",
                                   head_sha=delivery.head_sha, sent_at=timezone.now())
job = JobRun.objects.create(project=project, dispatch=dispatch, delivery_key=str(delivery.guid), run_id="9",
                            run_attempt=1, job_name="test (1)", status="in_progress", head_sha=delivery.head_sha,
                            event_type="push")
FailedTest.objects.create(job_run=job, name="test_add", classname="TestOps")
key = {"delivery_key": job.delivery_key, "project_id": project.pk, "run_id": "9", "run_attempt": 1, "job_name": "test (1)"}
from django.db import transaction
with transaction.atomic():
    locked = job_rows.job_locked(key)
    fields = {"status": "completed", "conclusion": "success"}
    completion = job_rows.job_complete_change(key, fields, (), timezone.now(), "dispatch", {})
    completed, has_failed_tests = job_rows.change_apply(completion)
job.refresh_from_db()
fresh = {**key, "job_name": "test (2)", "dispatch_id": dispatch.pk, "status": "in_progress", "event_type": "push",
         "head_sha": delivery.head_sha, "created_at": timezone.now()}
with transaction.atomic():
    inserted = job_rows.change_apply(job_rows.job_insert_change(fresh))[0]
with transaction.atomic():
    again = job_rows.change_apply(job_rows.job_insert_change(fresh))[0]
grid = Client().get("/")
print(json.dumps({"dispatch": dispatch.pk, "job": job.pk, "status": job.status, "failed": job.failed_tests.count(),
                  "has_failed_tests": has_failed_tests, "completed": completed.pk == locked.pk,
                  "one_statement": job_rows.one_statement_changes(),
                  "inserted": inserted is not None, "again": again,
                  "grid": grid.status_code, "dispatch_found": Dispatch.objects.filter(pk=dispatch.pk).exists()}))
"""


@postgres_only
def test_it_converts_a_seeded_store_keeping_every_row_and_the_relay_keeps_working(throwaway):
    url, run = throwaway
    before = counts(run)
    plan = manage(url, "partition_by_month")
    assert "job_run_key_unique: UNIQUE (delivery_key, project_id, run_id, run_attempt, job_name) becomes" in plan
    assert counts(run) == before  # a dry run changes nothing
    manage(url, "partition_by_month", "--apply")
    assert counts(run) == before
    partitioned = {row[0] for row in run("SELECT partrelid::regclass::text FROM pg_partitioned_table")}
    assert partitioned == {"relay_jobrun", "relay_dispatch", "relay_testrun"}
    ids_before = run("SELECT MAX(id) FROM relay_jobrun")[0][0]
    after = json.loads(manage(url, "shell", "-c", RELAY_WRITES_AND_READS).strip().splitlines()[-1])
    assert after == {
        "dispatch": after["dispatch"],
        "job": ids_before + 1,
        "status": "completed",
        "failed": 1,
        "has_failed_tests": True,
        "completed": True,  # the completion's one UPDATE, on the partitioned table
        "one_statement": False,  # the token and the row then take a transaction (no unique key to conflict on)
        "inserted": True,  # the relay's own insert, on the partitioned table
        "again": None,  # and its dedupe by the job's key, which no unique index holds any more
        "grid": 200,
        "dispatch_found": True,
    }


@postgres_only
def test_a_partition_is_made_for_the_months_ahead_and_a_second_run_only_adds_new_months(throwaway):
    url, run = throwaway
    manage(url, "partition_by_month", "--apply", "--ahead", "2")
    now = datetime.now(UTC)
    following = (now.year * 12 + now.month) % 12 + 1, now.year + (1 if now.month == 12 else 0)
    name = f"relay_jobrun_p{following[1]}{following[0]:02d}"
    assert run(f"SELECT to_regclass('{name}') IS NOT NULL")[0][0]
    again = manage(url, "partition_by_month", "--apply", "--ahead", "3")
    assert again.count("CREATE TABLE") == 3  # one more month for each table, nothing converted twice
    assert "convert" not in again
