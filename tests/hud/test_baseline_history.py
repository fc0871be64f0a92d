"""The backend dashboard's "backend-only failures over time"."""

import pytest

from hud.selectors_backend import heads_in_window
from hud.selectors_baseline_history import baseline_history
from relay.models import UpstreamCommit
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory

pytestmark = pytest.mark.django_db


def failing(project, sha, test):
    job = JobRunFactory(project=project, head_sha=sha, conclusion="failure", tests_total=5, event_type="pull_request")
    device = ("PRIVATEUSE1", "privateuse1") if project.is_reference else ("XPU", "xpu")
    FailedTestFactory(job_run=job, name=f"{test}_{device[1]}_float32", classname=f"test_ops.TestOps{device[0]}")


def test_it_counts_backend_only_and_shared_failures_per_day(client):
    reference = ProjectFactory(is_reference=True, level="L2")
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    shared, own = "a" * 40, "b" * 40
    for sha in (shared, own):
        UpstreamCommit.objects.create(sha=sha)
    failing(reference, shared, "test_add")
    failing(xpu, shared, "test_add")
    JobRunFactory(project=reference, head_sha=own, tests_total=5)
    failing(xpu, own, "test_mul")
    from datetime import timedelta

    from django.utils import timezone

    days = baseline_history(xpu, heads_in_window(xpu, "pr", timezone.now() - timedelta(days=1)))
    assert [(d.tested, d.backend_only, d.shared) for d in days] == [(2, 1, 1)]
    page = client.get("/crcr/intel/torch-xpu-ops").content.decode()
    assert "Backend-only failures over time" in page
