"""Causes add no work to the callback (issue 54: "the callback path unchanged"): a completed
callback full of failures whose reasons the relay clusters — a missing operator, with a known
issue matching by that cause and the backend opted in to cause issues — runs no function of the
causes' modules and no statement on their tables. Clustering is the minute sweep's
(relay/teststore/causes.py), reading what the callback stored."""

import json
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import relay
from relay.dispatch.sending import dispatch_client_payload
from relay.models import CauseHit, CauseIssuePolicy, Dispatch, FailedTest, KnownIssue
from tests.conftest import action_body
from tests.factories import DispatchFactory, ProjectFactory

from .conftest import FFT, failing

pytestmark = pytest.mark.django_db
REPO, REPO_ID = "intel/torch-xpu-ops", 123456
RELAY = Path(relay.__file__).parent
CAUSES_CODE = (
    RELAY / "policy" / "reasons.py",
    RELAY / "teststore" / "causes.py",
    RELAY / "teststore" / "cause_counts.py",
    RELAY / "results" / "causes.py",
    RELAY / "checks" / "cause_issues.py",
)
CAUSES_TABLES = (
    "relay_failurecause",
    "relay_causehit",
    "relay_causeissue",
    "relay_causerun",
    "relay_causecommit",
    "relay_causetest",
)


def causes_code(filename: str) -> bool:
    path = Path(filename)
    return any(path == part or part in path.parents for part in CAUSES_CODE)


class Calls:
    """Every Python function this thread calls while the block runs, by its file."""

    def __init__(self):
        self.files: set[str] = set()

    def __enter__(self):
        sys.setprofile(self._seen)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)

    def _seen(self, frame, event, arg):
        if event == "call":
            self.files.add(frame.f_code.co_filename)


@pytest.fixture
def payload(db):
    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L4", device_type="xpu")
    CauseIssuePolicy.objects.create(project=project, enabled=True)
    KnownIssue.objects.create(title="fft missing", cause="NotImplementedError: aten::_fft_c2c", all_backends=True)
    dispatch = DispatchFactory(
        project=project, state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(seconds=9)
    )
    return dispatch_client_payload(dispatch)


def test_a_failing_callback_runs_no_causes_code_and_touches_no_causes_table(client, oidc, payload):
    failed = [failing("XPU", "xpu", f"test_fft_{i}", FFT.format(key="XPU")) for i in range(50)]
    body = action_body(payload, "completed", "failure", failed_tests=failed)
    token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    with CaptureQueriesContext(connection) as queries, Calls() as calls:
        answer = client.post(
            "/github/callback",
            data=json.dumps(body),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
    assert answer.json() == {"ok": True, "status": "completed"}
    assert FailedTest.objects.count() == 50, "the failures were stored: the sweep has what it needs"
    assert sorted(f for f in calls.files if causes_code(f)) == []
    assert [q["sql"] for q in queries if any(t in q["sql"] for t in CAUSES_TABLES)] == []
    assert not CauseHit.objects.exists()


def test_the_probe_sees_the_causes_code_when_it_runs():
    """The check above would pass vacuously if the profile missed these modules."""
    from relay.policy.reasons import reason_of

    with Calls() as calls:
        reason_of(FFT.format(key="XPU"))
    assert any(causes_code(f) for f in calls.files)
