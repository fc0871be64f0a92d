"""What the lists of causes count, kept beside the hits: per (cause, job attempt) its failures
(CauseRun), per (cause, backend, commit) and (cause, backend, test) when it last failed
(CauseCommit, CauseTest). Written from the hits themselves, in SQL, by the sweep that wrote
them (relay/teststore/causes.py), so each count a page reads is the one the hits give:

- a job attempt's hits all carry its created_at, so its CauseRun row is in a window exactly
  when its hits are; the row is recounted from its hits whenever the attempt is written again
  (an attempt's failures may straddle two of the sweep's steps);
- a commit or a test fails through a cause in a window [since, now] exactly when its latest hit
  is in it; the latest only moves later, so a write keeps the later of the two.

Retention deletes each row once its time is past the store's (relay/ops/retention.py); a retired
version's rows go with its causes (on delete cascade)."""

from django.db import connection

from relay.models import CauseCommit, CauseHit, CauseRun, CauseTest

_RUN_COLUMNS = "cause_id, version, project_id, job_run_id, sha, created_at, failures"


def cause_counts_write(version: int, job_ids: list[int] | None = None) -> None:
    """The rows of these job attempts' hits under `version` (every attempt's when None) brought
    up to date with them."""
    where, params = _where(version, job_ids)
    hits = CauseHit._meta.db_table
    statements = (
        (
            f"INSERT INTO {CauseRun._meta.db_table} ({_RUN_COLUMNS}) "
            f"SELECT cause_id, version, project_id, job_run_id, MIN(sha), MIN(created_at), COUNT(*) FROM {hits} "
            f"WHERE {where} GROUP BY cause_id, version, project_id, job_run_id "
            "ON CONFLICT (version, cause_id, job_run_id) DO UPDATE SET failures = excluded.failures"
        ),
        _latest(CauseCommit, "sha", where),
        _latest(CauseTest, "identity_id", where),
    )
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql, params)


def _where(version: int, job_ids: list[int] | None) -> tuple[str, list]:
    if job_ids is None:
        return "version = %s", [version]
    return f"version = %s AND job_run_id IN ({', '.join(['%s'] * len(job_ids))})", [version, *job_ids]


def _latest(model, key: str, where: str) -> str:
    """Upsert (cause, backend, key) → its latest hit, keeping the later of the stored one and this."""
    table = model._meta.db_table
    later = "GREATEST" if connection.vendor == "postgresql" else "MAX"
    return (
        f"INSERT INTO {table} (cause_id, version, project_id, {key}, last_at) "
        f"SELECT cause_id, version, project_id, {key}, MAX(created_at) FROM {CauseHit._meta.db_table} "
        f"WHERE {where} GROUP BY cause_id, version, project_id, {key} "
        f"ON CONFLICT (version, cause_id, project_id, {key}) "
        f"DO UPDATE SET last_at = {later}({table}.last_at, excluded.last_at)"
    )
