"""On PostgreSQL a callback's common step is one statement: the job's new row (made from the
dispatch the statement itself finds) or its completed row (guarded by the dispatch it was made
for) and the token's jti, written together in that statement's own transaction, with nothing
looked up first (relay/callbacks/job_rows.py: change_with_token). Counted from libpq's own trace of the
connection: each round trip ends with the server's ReadyForQuery. The callbacks here run as in
production, outside any transaction of the test's (`transaction=True`)."""

import json
import os
import tempfile
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from relay.callbacks import job_rows
from relay.dispatch.sending import dispatch_client_payload
from relay.models import Dispatch, FailedTest, JobRun, UsedToken
from tests.conftest import action_body
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the one-statement step is PostgreSQL's"),
]

REPO, REPO_ID = "amd/rocm-pytorch-ci", 424242


def _post(client, oidc, body, token=None):
    token = token or oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    return client.post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


@contextmanager
def _traced():
    """The connection's protocol messages while the block runs, as libpq writes them."""
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    with tempfile.TemporaryFile("w+") as trace:
        pgconn.trace(trace.fileno())
        messages: list[str] = []
        try:
            yield messages
        finally:
            pgconn.untrace()
            os.fsync(trace.fileno())
            trace.seek(0)
            messages += trace.read().splitlines()


def _round_trips(messages: list[str]) -> int:
    """How many times the client sent and then waited: each run of client messages (F) that the
    server (B) answers."""
    directions = [line.split("\t")[1] for line in messages if line.count("\t") >= 2]
    return sum(1 for sent, answered in zip(directions, directions[1:]) if (sent, answered) == ("F", "B"))


def _statements(messages: list[str]) -> list[str]:
    """What the client asked the server to run."""
    return [line for line in messages if "\tF\t" in line and ("\tParse\t" in line or "\tQuery\t" in line)]


@pytest.fixture
def payload():
    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")
    dispatch = DispatchFactory(
        project=project, state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(seconds=5)
    )
    return dispatch_client_payload(dispatch)


def test_in_progress_and_its_completion_are_one_round_trip_each(client, oidc, payload):
    job_rows._partitioned(JobRun)  # asked once per process, not per callback
    for warm_up in ("warm-up 1", "warm-up 2", "warm-up 3"):  # each statement prepared on its third run
        assert _post(client, oidc, action_body(payload, "in_progress", job=warm_up)).status_code == 200
        assert _post(client, oidc, action_body(payload, "completed", "success", job=warm_up)).status_code == 200
    with _traced() as started:
        assert _post(client, oidc, action_body(payload, "in_progress")).json()["status"] == "in_progress"
    with _traced() as completed:
        assert _post(client, oidc, action_body(payload, "completed", "success")).json()["status"] == "completed"
    # [job INSERT from its dispatch + token INSERT] (two before: the dispatch, then that statement;
    # three before that: the dispatch, BEGIN + token + job INSERT, COMMIT)
    assert _round_trips(started) == 1
    # [job UPDATE + old failed tests DELETE + token INSERT] (four before: the dispatch, BEGIN +
    # token + job lock, job UPDATE, COMMIT)
    assert _round_trips(completed) == 1
    assert not any("BEGIN" in s or "COMMIT" in s for s in _statements(started) + _statements(completed))
    job = JobRun.objects.get(job_name="build")
    assert (job.status, job.conclusion, job.execution_seconds is not None) == ("completed", "success", True)
    assert 5 <= job.queue_seconds < 60, "measured from the dispatch's sending, in the statement"
    assert UsedToken.objects.count() == 8


def test_a_token_that_carried_this_callback_already_undoes_the_job_row_written_with_it(client, oidc, payload):
    token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    body = action_body(payload, "in_progress")
    assert _post(client, oidc, body, token).json()["status"] == "in_progress"
    JobRun.objects.all().delete()  # so that the retry's statement does write a row, until the token refuses it
    assert _post(client, oidc, body, token).json() == {"ok": True, "status": "duplicate"}
    assert not JobRun.objects.exists() and UsedToken.objects.count() == 1


def test_a_replayed_token_for_another_job_writes_nothing(client, oidc, payload):
    token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    assert _post(client, oidc, action_body(payload, "in_progress"), token).status_code == 200
    replay = _post(client, oidc, action_body(payload, "in_progress", job="other"), token)
    assert replay.status_code == 401 and "already used" in replay.json()["detail"]
    finish = _post(client, oidc, action_body(payload, "completed", "failure"), token)
    assert finish.status_code == 401
    assert list(JobRun.objects.values_list("job_name", "status")) == [("build", "in_progress")]


def test_failed_tests_come_in_the_same_one_statement(client, oidc, payload):
    tests = [{"name": f"test_add_{i}", "classname": "TestAddXPU", "message": "mismatch"} for i in range(700)]
    assert _post(client, oidc, action_body(payload, "in_progress", job="warm-up")).status_code == 200
    assert _post(client, oidc, action_body(payload, "in_progress")).status_code == 200
    with _traced() as completed:
        done = _post(client, oidc, action_body(payload, "completed", "failure", failed_tests=tests))
    assert done.json()["status"] == "completed"
    assert not any("BEGIN" in statement for statement in _statements(completed)), "one statement, no transaction"
    stored = FailedTest.objects.filter(job_run__job_name="build").order_by("id")
    assert [t.name for t in stored] == [t["name"] for t in tests] and stored[0].outcome == "failed"


def test_a_completion_whose_failed_tests_cannot_be_stored_changes_nothing(client, oidc, payload, monkeypatch):
    from relay.models import FailedTest as Model

    assert _post(client, oidc, action_body(payload, "in_progress")).status_code == 200
    name = Model._meta.get_field("name")
    monkeypatch.setattr(name, "db_type", lambda connection: "integer")  # the statement's cast of names then fails
    job_rows._with_token_sql.cache_clear()
    client.raise_request_exception = False
    try:
        response = _post(client, oidc, action_body(payload, "completed", "failure", failed_tests=[{"name": "t"}]))
    finally:
        job_rows._with_token_sql.cache_clear()
    assert response.status_code >= 500
    assert JobRun.objects.get().status == "in_progress" and not FailedTest.objects.exists()
    assert UsedToken.objects.count() == 1


def test_a_completion_in_one_statement_replaces_the_failed_tests_its_in_progress_sent(client, oidc, payload):
    started = action_body(payload, "in_progress", failed_tests=[{"name": "test_early", "classname": "TestX"}])
    assert _post(client, oidc, started).json()["status"] == "in_progress"
    assert FailedTest.objects.count() == 1
    with _traced() as completed:
        assert _post(client, oidc, action_body(payload, "completed", "success")).json()["status"] == "completed"
    assert not any("BEGIN" in statement for statement in _statements(completed)), "one statement, no transaction"
    assert not FailedTest.objects.exists()


def test_a_409_leaves_the_token_unused_as_before(client, oidc, payload):
    assert _post(client, oidc, action_body(payload, "completed", "success")).status_code == 200
    token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    assert _post(client, oidc, action_body(payload, "in_progress"), token).status_code == 409
    assert not UsedToken.objects.filter(used_for__endswith=":in_progress").exists()
    assert JobRun.objects.get().status == "completed"


def test_an_in_progress_for_a_delivery_never_dispatched_to_it_writes_nothing_and_uses_no_token(client, oidc, payload):
    other = dict(payload, delivery_id="9f1c2d3e-0000-4000-8000-000000000000")
    other.pop("callback_token", None)
    refused = _post(client, oidc, action_body(other, "in_progress"))
    assert refused.status_code == 403 and "never dispatched" in refused.json()["detail"]
    assert not JobRun.objects.exists() and not UsedToken.objects.exists()


def test_an_in_progress_ends_the_sweepers_never_started_row_of_its_dispatch(client, oidc, payload):
    from relay.dispatch.results_sweep import results_sweep

    Dispatch.objects.update(sent_at=timezone.now() - timedelta(hours=7))
    assert results_sweep().never_started == 1
    assert _post(client, oidc, action_body(payload, "in_progress")).json()["status"] == "in_progress"
    assert list(JobRun.objects.values_list("job_name", "status", "ended_by")) == [("build", "in_progress", "")]
    assert JobRun.objects.get().queue_seconds >= 7 * 3600
