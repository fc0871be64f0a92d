"""`manage.py structure answers`: every /api/v1 GET route asked on a tiny store with the clock frozen,
one file per answer, the same bytes on every run, and the store and the clock left as they were."""

from datetime import datetime, timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.utils import timezone

from relay.models import JobRun, TestIdentity, TestMute, identity_digest
from tests.factories import DispatchFactory, FailedTestFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db
AT = "2020-01-01T12:00:00Z"
MOMENT = datetime.fromisoformat(AT)
ADDMM = "test_ops.TestCommon.test_addmm_float32"


@pytest.fixture
def store():
    """Two backends, a trunk commit and a PR head, a passing and a failing job, a dispatch and a
    mute that expires a day after AT (long expired by any wall clock this test runs under)."""
    before = MOMENT - timedelta(hours=2)
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    ProjectFactory(full_name="pytorch/openreg-ci", level="L4", is_reference=True)
    trunk = UpstreamCommitFactory(landed_at=before)
    UpstreamCommitFactory(is_trunk=False, pr_number=150001, landed_at=before)
    JobRunFactory(project=xpu, head_sha=trunk.sha, created_at=before, completed_at=before)
    failing = JobRunFactory(project=xpu, head_sha=trunk.sha, conclusion="failure", created_at=before)
    FailedTestFactory(job_run=failing)
    DispatchFactory(project=xpu, created_at=before)
    identity = TestIdentity.objects.create(
        digest=identity_digest(ADDMM), identity=ADDMM, module="test_ops", test_class="TestCommon", method="test_addmm"
    )
    TestMute.objects.create(
        identity=identity,
        project=xpu,
        reason="fixed upstream",
        owner="xpu-oncall",
        created_by="dana",
        created_at=before,
        expires_at=MOMENT + timedelta(days=1),
    )
    return xpu, failing


def answers(path) -> tuple[str, dict[str, bytes]]:
    out = StringIO()
    call_command("structure", "answers", str(path), "--at", AT, stdout=out)
    return out.getvalue(), {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def test_every_route_answers_into_its_own_file_with_status_and_body(store, tmp_path):
    xpu, failing = store
    said, files = answers(tmp_path / "a")
    assert "answers at 2020-01-01T12:00:00+00:00" in said and "of the 40 API routes" in said
    assert len(files) > 100 and "index.txt" in files
    assert files["v1.txt"].startswith(b"200 OK\nContent-Type: application/json\n\n{")
    assert b'"full_name":"intel/torch-xpu-ops"' in files["v1_projects_intel_torch-xpu-ops.txt"]
    assert files[f"v1_jobs_{failing.pk}_failed-tests.txt"].startswith(b"200 OK")
    assert files["schema.txt"].startswith(b"200 OK")


def test_operator_routes_are_asked_as_a_reader_and_refused_to_the_public(store, tmp_path):
    _, files = answers(tmp_path / "a")
    assert files["v1_deliveries.reader.txt"].startswith(b"200 OK")
    assert files["v1_deliveries.txt"].startswith(b"401 ")


def test_answers_are_given_at_the_frozen_instant_not_the_wall_clock(store, tmp_path):
    _, files = answers(tmp_path / "a")
    assert b'"active":true' in files["v1_mutes_active=true.txt"]


def test_two_runs_write_the_same_bytes(store, tmp_path):
    assert answers(tmp_path / "a")[1] == answers(tmp_path / "b")[1]


def test_the_store_and_the_clock_are_left_as_they_were(store, tmp_path):
    jobs, users, clock = JobRun.objects.count(), get_user_model().objects.count(), timezone.now
    answers(tmp_path / "a")
    assert (JobRun.objects.count(), get_user_model().objects.count()) == (jobs, users)
    assert timezone.now is clock
