"""On PostgreSQL the callback's hot statements are prepared on the server (relay/callbacks/
job_rows.py: _cursor, crcr/postgresql: prepared_cursor), and what they store is what Django's
own cursors store."""

import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from relay.dispatch.sending import dispatch_client_payload
from relay.models import Dispatch, FailedTest, JobRun, UsedToken
from tests.conftest import action_body
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements are PostgreSQL's"),
]

REPO, REPO_ID = "amd/rocm-pytorch-ci", 424242


def _post(client, oidc, body):
    token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    return client.post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def _prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_a_connection_prepares_the_job_and_token_statements_once_it_has_run_them_twice(client, oidc):
    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")
    for _ in range(3):
        dispatch = DispatchFactory(project=project, state=Dispatch.State.SENT, sent_at=timezone.now())
        payload = dispatch_client_payload(dispatch)
        assert _post(client, oidc, action_body(payload, "in_progress")).status_code == 200
        done = _post(
            client, oidc, action_body(payload, "completed", "failure", test_results={"passed": 3, "failed": 1})
        )
        assert done.json() == {"ok": True, "status": "completed"}
    prepared = _prepared_statements()
    assert any("FROM relay_dispatch d" in statement for statement in prepared)
    for job_statement in ('WITH j AS (INSERT INTO "relay_jobrun"', 'WITH j AS (UPDATE "relay_jobrun" SET'):
        assert any(s.startswith(job_statement) and 'INSERT INTO "relay_usedtoken"' in s for s in prepared), (
            job_statement
        )
    assert UsedToken.objects.count() == 6 and JobRun.objects.filter(status="completed").count() == 3


def _job_update_prepared(with_failed_tests: bool) -> bool:
    """Whether the completion's one statement (job_rows.change_with_token), with or without the
    failed tests' INSERT, is prepared on this connection."""
    return any(
        statement.startswith('WITH j AS (UPDATE "relay_jobrun" SET')
        and ("f AS (INSERT" in statement) == with_failed_tests
        for statement in _prepared_statements()
    )


@pytest.mark.parametrize(
    "failed_tests",
    [[{"name": "test_add_xpu_float32", "classname": "TestAddXPU", "message": "mismatch"}], []],
    ids=["with failed tests", "without"],
)
def test_a_prepared_completion_stores_what_an_unprepared_one_stores(client, oidc, failed_tests):
    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")
    connection.ensure_connection()
    connection.connection.execute("DEALLOCATE ALL")  # psycopg forgets its own cache with it
    stored, prepared_before = [], []
    for _ in range(4):  # psycopg prepares a statement on its third run: unprepared, then prepared
        prepared_before.append(_job_update_prepared(bool(failed_tests)))
        dispatch = DispatchFactory(
            project=project, state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(seconds=5)
        )
        payload = dispatch_client_payload(dispatch)
        _post(client, oidc, action_body(payload, "in_progress"))
        body = action_body(
            payload,
            "completed",
            "failure",
            test_results={"passed": 70000, "failed": 2, "skipped": 1},
            failed_tests=failed_tests,
            environment={"device": "rocm", "torch_version": "2.13.0a0"},
        )
        assert _post(client, oidc, body).status_code == 200
        job = JobRun.objects.get(dispatch=dispatch)
        tests = list(FailedTest.objects.filter(job_run=job).values_list("name", "classname", "message"))
        stored.append(
            (
                job.status,
                job.conclusion,
                job.tests_passed,
                job.tests_failed,
                job.tests_total,
                job.queue_seconds is not None,
            )
            + (job.execution_seconds is not None, sorted(job.body), job.environment, tests)
        )
    assert stored[0][:3] == ("completed", "failure", 70000) and stored[0][-2] == {
        "device": "rocm",
        "torch_version": "2.13.0a0",
    }
    assert prepared_before == [False, False, False, True]
    assert all(row == stored[0] for row in stored)
