"""OutcomeCounts per upstream test module: sent on the callback (optional, checked there, 4xx when bad),
written off the callback by the minute sweep, read from the reference's own reports, and named by
the identity rule so a backend's module and the reference's are one row."""

import json

import pytest
from django.utils import timezone

from relay.enablement.counts import counts_sweep
from relay.models import CountedCommit, Dispatch, JobRun, ModuleCount
from relay.reference.imports import reference_import
from tests.client import JUNIT as CLIENT_JUNIT
from tests.client import client_module
from tests.conftest import action_body, callback_sender
from tests.factories import DispatchFactory, ProjectFactory
from tests.relay.test_reference_import import SHA, UPSTREAM, openreg_job, reference, upstream, zipped  # noqa: F401

pytestmark = pytest.mark.django_db

REPO, REPO_ID = "intel/torch-xpu-ops", 123456


@pytest.fixture
def payload(db):
    from relay.dispatch.sending import dispatch_client_payload

    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")
    return dispatch_client_payload(DispatchFactory(project=project, state=Dispatch.State.SENT))


@pytest.fixture
def call(client, oidc):
    return callback_sender(client, oidc, REPO, REPO_ID)


def stored() -> dict:
    return {
        row.module: (row.passed, row.failed, row.error, row.skipped, row.xfailed, row.xpassed)
        for row in ModuleCount.objects.all()
    }


def test_a_completed_callbacks_module_counts_are_written_by_the_sweep_under_the_identity_rule(call, payload):
    counts = {
        "test/test_nn.py": {"passed": 10, "failed": 1, "skipped": 3},
        "test.test_nn": {"passed": 2, "errors": 1},
        "test/distributed/test_c10d.py": {"passed": 4, "xfailed": 2, "xpassed": 1},
    }
    answer = call(action_body(payload, "completed", "failure", module_counts=counts))
    assert answer.status_code == 200, answer.content
    assert not ModuleCount.objects.exists(), "the callback itself writes no module rows"
    assert counts_sweep() == 1
    assert stored() == {"test_nn": (12, 1, 1, 3, 0, 0), "distributed.test_c10d": (4, 0, 0, 0, 2, 1)}
    job = JobRun.objects.get()
    assert {row.job_run_id for row in ModuleCount.objects.all()} == {job.id}
    assert {row.sha for row in ModuleCount.objects.all()} == {job.head_sha}


def test_a_second_sweep_writes_nothing_twice(call, payload):
    call(action_body(payload, "completed", "success", module_counts={"test_ops": {"passed": 3}}))
    counts_sweep()
    counts_sweep(now=timezone.now())
    assert ModuleCount.objects.count() == 1


def test_module_counts_sent_as_json_text_are_read_too(call, payload):
    text = json.dumps({"test_ops": {"passed": 3}})
    assert call(action_body(payload, "completed", "success", module_counts=text)).status_code == 200
    counts_sweep()
    assert stored() == {"test_ops": (3, 0, 0, 0, 0, 0)}


def test_the_action_without_module_counts_is_accepted_and_counts_nothing(call, payload):
    assert call(action_body(payload, "completed", "success", test_results={"passed": 3})).status_code == 200
    assert counts_sweep() == 0 and not ModuleCount.objects.exists()


def test_an_in_progress_callbacks_counts_are_not_read(call, payload):
    call(action_body(payload, "in_progress", module_counts={"test_ops": {"passed": 3}}))
    assert counts_sweep() == 0


@pytest.mark.parametrize(
    ("counts", "named"),
    [
        (["test_ops"], "'workflow.module_counts' must be an object"),
        ({"test_ops": 3}, "'workflow.module_counts.test_ops' must be an object of counts"),
        ({"test_ops": {"passed": -1}}, "'workflow.module_counts.test_ops'.passed must be"),
        ({"test_ops": {"failed": "2"}}, "'workflow.module_counts.test_ops'.failed must be"),
        ({"test_ops": {"skipped": True}}, "'workflow.module_counts.test_ops'.skipped must be"),
        ({"test_ops": {"passed": 2**31}}, "below 2**31"),
        ({"x" * 301: {"passed": 1}}, "longer than 300 characters"),
        ({f"test_m{i}": {"passed": 1} for i in range(2001)}, "more than 2000 modules"),
        ("{not json", "'workflow.module_counts' must be an object"),
    ],
)
def test_bad_module_counts_answer_400_naming_the_field_and_store_nothing(call, payload, counts, named):
    answer = call(action_body(payload, "completed", "success", module_counts=counts))
    assert answer.status_code == 400
    assert named in answer.json()["detail"]
    assert not JobRun.objects.exists()


def test_the_references_imported_reports_are_counted_per_module(upstream, reference):  # noqa: F811
    upstream.add_workflow_run(
        UPSTREAM,
        SHA,
        jobs=[openreg_job()],
        artifacts=[
            {
                "name": "test-reports-test-openreg-1-1-linux.2xlarge_{job_id}",
                "data": zipped("openreg-shard1.xml", "openreg-shard2.xml"),
            }
        ],
    )
    reference_import(SHA)
    job = JobRun.objects.get()
    rows = stored()
    assert set(rows) == {"test_autograd", "test_openreg", "test_ops", "test_torch", "test_nn", "test_profiler"}
    assert sum(sum(counts) for counts in rows.values()) == job.tests_total
    passed = sum(counts[0] for counts in rows.values())
    assert passed == job.tests_passed


def test_the_clients_counts_name_the_module_the_references_do(call, payload):
    """The client's body, from a pytest report run from the checkout's root, lands under the
    module the reference's `test_nn.TestNNDevicePRIVATEUSE1` has."""
    crcr = client_module()
    summary = crcr.junit_read([str(CLIENT_JUNIT / "pytest_failing.xml")])
    assert set(summary.modules) == {"test.test_nn"}
    assert sum(summary.modules["test.test_nn"].values()) == summary.counts()["total"]
    body = action_body(payload, "completed", "failure", module_counts=summary.modules)
    assert call(body).status_code == 200
    counts_sweep()
    ((module, counts),) = stored().items()
    assert module == "test_nn"
    assert sum(counts) == summary.counts()["total"]


def test_counts_are_pruned_with_the_test_store_and_newer_ones_kept(settings):
    from datetime import timedelta

    from relay.enablement.counts import counts_write
    from relay.ops.retention import retention_sweep
    from tests.factories import JobRunFactory

    settings.CRCR_RETENTION_TEST_DAYS = 90
    old = JobRunFactory(created_at=timezone.now() - timedelta(days=91))
    new = JobRunFactory()
    for job in (old, new):
        counts_write(job.id, job.project_id, job.head_sha, job.created_at, {"test_ops": {"passed": 1}})
    retention_sweep()
    assert list(ModuleCount.objects.values_list("job_run_id", flat=True)) == [new.id]
    assert list(CountedCommit.objects.values_list("project_id", flat=True)) == [new.project_id]


def test_a_backend_s_commit_is_marked_counted_once_with_its_first_job_s_rows():
    from relay.enablement.counts import counts_write
    from tests.factories import JobRunFactory

    first = JobRunFactory()
    again = JobRunFactory(project=first.project, head_sha=first.head_sha, job_name="test (2)")
    empty = JobRunFactory(head_sha=first.head_sha)
    for job in (first, again):
        counts_write(job.id, job.project_id, job.head_sha, job.created_at, {"test_ops": {"passed": 1}})
    counts_write(empty.id, empty.project_id, empty.head_sha, empty.created_at, {})
    assert list(CountedCommit.objects.values_list("project_id", "sha", "created_at")) == [
        (first.project_id, first.head_sha, first.created_at)
    ]


def test_a_sweep_reads_page_after_page(call, payload):
    for run in ("1", "2", "3"):
        call(action_body(payload, "completed", "success", run_id=run, module_counts={f"test_m{run}": {"passed": 1}}))
    assert counts_sweep(limit=2) == 3, "page after page"
    assert set(ModuleCount.objects.values_list("module", flat=True)) == {"test_m1", "test_m2", "test_m3"}


def test_a_sweep_past_its_pages_moves_its_watermark_only_as_far_as_it_read(call, payload, monkeypatch):
    from relay.enablement import counts

    monkeypatch.setattr(counts, "MAX_PAGES", 1)
    for run in ("1", "2", "3"):
        call(action_body(payload, "completed", "success", run_id=run, module_counts={f"test_m{run}": {"passed": 1}}))
    assert counts_sweep(limit=2) == 2
    assert ModuleCount.objects.count() == 2
    counts_sweep(limit=2)
    assert set(ModuleCount.objects.values_list("module", flat=True)) == {"test_m1", "test_m2", "test_m3"}
