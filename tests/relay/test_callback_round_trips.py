"""On PostgreSQL a callback's transaction starts in one round trip: BEGIN, the token's INSERT and
the job's first statement travel together (relay/callbacks/job_rows.py: batch, crcr/postgresql:
pipeline). Counted from libpq's own trace of the connection: each round trip ends with the
server's ReadyForQuery."""

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
from relay.models import Dispatch, JobRun, UsedToken
from tests.conftest import action_body
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="pipeline mode is PostgreSQL's"),
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


@pytest.fixture
def payload():
    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")
    dispatch = DispatchFactory(
        project=project, state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(seconds=5)
    )
    return dispatch_client_payload(dispatch)


def test_the_token_and_the_jobs_first_statement_share_one_round_trip(client, oidc, payload):
    # The test's own transaction makes the callback's a savepoint: one round trip each way more.
    job_rows._partitioned(JobRun)  # asked once per process, not per callback
    with _traced() as started:
        assert _post(client, oidc, action_body(payload, "in_progress")).json()["status"] == "in_progress"
    with _traced() as completed:
        assert _post(client, oidc, action_body(payload, "completed", "success")).json()["status"] == "completed"
    # project, dispatch, SAVEPOINT, [token + job INSERT], RELEASE (six before the batching)
    assert _round_trips(started) == 5
    # dispatch, SAVEPOINT, [token + job lock], job UPDATE, RELEASE (six before): the project was
    # cached by the first callback
    assert _round_trips(completed) == 5
    assert JobRun.objects.get().status == "completed" and UsedToken.objects.count() == 2


def test_a_token_that_carried_this_callback_already_undoes_the_job_statement_sent_with_it(client, oidc, payload):
    token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    body = action_body(payload, "in_progress")
    assert _post(client, oidc, body, token).json()["status"] == "in_progress"
    JobRun.objects.all().delete()  # so that the retry's speculative INSERT would make a row
    assert _post(client, oidc, body, token).json() == {"ok": True, "status": "duplicate"}
    assert not JobRun.objects.exists() and UsedToken.objects.count() == 1
