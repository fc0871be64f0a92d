"""/api/v1/commits/<sha>/baseline, /api/v1/prs/<n>, /api/v1/prs/<n>/gate: the same verdicts as the pages."""

import pytest

from relay.models import UpstreamCommit
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory

pytestmark = pytest.mark.django_db
SHA = "c" * 40


@pytest.fixture
def commit(db):
    reference = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, level="L2")
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    UpstreamCommit.objects.create(sha=SHA, title="Fix addmm", pr_number=77)
    ref_job = JobRunFactory(project=reference, head_sha=SHA, conclusion="failure", tests_total=10, pr_number=77)
    FailedTestFactory(job_run=ref_job, name="test_add_privateuse1_float32", classname="test_ops.TestCommonPRIVATEUSE1")
    xpu_job = JobRunFactory(project=xpu, head_sha=SHA, conclusion="failure", tests_total=10, pr_number=77)
    FailedTestFactory(job_run=xpu_job, name="test_add_xpu_float32", classname="test_ops.TestCommonXPU")
    FailedTestFactory(job_run=xpu_job, name="test_mul_xpu_float32", classname="test_ops.TestCommonXPU")
    return xpu


def test_the_baseline_endpoint_splits_shared_and_backend_only_failures(api, commit):
    body = api.get(f"/api/v1/commits/{SHA[:10]}/baseline").json()
    assert body["sha"] == SHA
    text = str(body)
    assert "test_add" in text and "test_mul" in text
    backend = next(b for b in body["backends"] if "torch-xpu-ops" in str(b))
    assert "shared" in str(backend) and "backend" in str(backend)


def test_the_baseline_of_an_unknown_commit_is_a_404(api, db):
    assert api.get("/api/v1/commits/deadbee/baseline").status_code == 404


def test_a_pr_lists_its_heads_with_each_backends_status(api, commit):
    body = api.get("/api/v1/prs/77").json()
    assert body["heads"][0]["sha"] == SHA
    assert body["heads"][0]["backends"]["intel/torch-xpu-ops"] == "failure"
    assert "backends passed" in body["summary"]


def test_the_gate_fails_when_an_l4_backend_fails(api, commit):
    body = api.get("/api/v1/prs/77/gate").json()
    assert (body["pr"], body["head_sha"], body["state"]) == (77, SHA, "failure")


def test_an_unknown_pr_is_a_404(api, db):
    assert api.get("/api/v1/prs/999/gate").json()["code"] == "not_found"


def test_both_pr_endpoints_speak_one_gate_vocabulary(api, db):
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    UpstreamCommit.objects.create(sha="d" * 40, title="Wip", pr_number=78)
    JobRunFactory(project=xpu, head_sha="d" * 40, status="in_progress", conclusion="", pr_number=78)
    gate, pr = api.get("/api/v1/prs/78/gate").json(), api.get("/api/v1/prs/78").json()
    assert gate["state"] == pr["gate"]["state"] == "pending"


def test_culprits_name_since_which_commit_a_backend_fails(api, db):
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L2")
    good = UpstreamCommit.objects.create(sha="1" * 40, title="Good", is_trunk=True)
    bad = UpstreamCommit.objects.create(sha="2" * 40, title="Break conv", is_trunk=True, parent_sha=good.sha)
    JobRunFactory(project=xpu, head_sha=good.sha, conclusion="success")
    JobRunFactory(project=xpu, head_sha=bad.sha, conclusion="failure")
    body = api.get("/api/v1/culprits?backend=Intel/Torch-XPU-Ops").json()
    (streak,) = body["streaks"]
    assert (streak["first_failing"], streak["last_passing"], streak["exact"]) == (bad.sha, good.sha, True)
    assert api.get(f"/api/v1/culprits?backend=intel/torch-xpu-ops&sha={good.sha[:8]}").json()["streaks"] == []


def test_culprits_answer_bad_input_with_a_clear_4xx(api, db):
    ProjectFactory(full_name="intel/torch-xpu-ops", level="L2")
    assert api.get("/api/v1/culprits").status_code == 404
    assert api.get("/api/v1/culprits?backend=intel/torch-xpu-ops&sha=zz").status_code == 400
    assert api.get("/api/v1/culprits?backend=intel/torch%00-xpu-ops").status_code == 400
    assert api.get("/api/v1/culprits?backend=intel/torch-xpu-ops&sha=abcdef1").status_code == 404
