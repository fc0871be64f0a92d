"""The test store, written from the stored job rows: one identity per upstream test, the
non-passing outcomes per (backend, commit, attempt), and one flakiness step per run."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.models import JobRun, TestedCommit, TestHealth, TestIdentity, TestRun, UpstreamCommit
from relay.ops.retention import retention_sweep
from relay.teststore.store import commit_record, store_rematch, store_sweep
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory

pytestmark = pytest.mark.django_db
SHAS = [f"{n:x}" * 40 for n in range(1, 6)]
ADD = {"classname": "test_ops.TestCommonXPU", "name": "test_add_xpu_float32", "file": "test/test_ops.py"}
MUL = {"classname": "test_ops.TestCommonXPU", "name": "test_mul_xpu_bfloat16", "file": "test/test_ops.py"}


@pytest.fixture
def xpu():
    return ProjectFactory(full_name="intel/torch-xpu-ops", level="L2")


def job(project, sha, conclusion="success", failed=(), attempt=1, run_id="100", name="test", **fields):
    """A job row; a push (the factory's event) is of a trunk commit, which the relay recorded when
    it heard the push, as its intake does before dispatching one."""
    if fields.get("event_type", "push") == "push":
        UpstreamCommit.objects.get_or_create(sha=sha, defaults={"is_trunk": True})
    row = JobRunFactory(
        project=project,
        head_sha=sha,
        conclusion=conclusion,
        run_id=run_id,
        run_attempt=attempt,
        job_name=name,
        tests_total=fields.pop("tests_total", 50),
        tests_failed=len(failed) or None,
        created_at=fields.pop("created_at", timezone.now() + timedelta(seconds=attempt)),
        **fields,
    )
    for test in failed:
        FailedTestFactory(job_run=row, **test)
    return row


def health(project, method="test_add"):
    return TestHealth.objects.get(project=project, identity__method=method)


def test_a_failed_test_becomes_one_identity_with_its_parts_kept_apart(xpu):
    failing = job(xpu, SHAS[0], "failure", [ADD, {**ADD, "outcome": "error", "name": "test_add_xpu_int64"}])
    assert commit_record(SHAS[0], xpu).runs == 2
    identity = TestIdentity.objects.get(dtypes="float32")
    assert (identity.identity, identity.module, identity.test_class, identity.method) == (
        "test_ops.TestCommon.test_add_float32",
        "test_ops",
        "TestCommon",
        "test_add",
    )
    assert sorted(TestRun.objects.values_list("outcome", "attempt", "job_run_id", "sha")) == [
        ("error", 1, failing.id, SHAS[0]),
        ("failed", 1, failing.id, SHAS[0]),
    ]


def test_a_passing_job_writes_no_row_but_says_it_reported_per_test_results(xpu):
    job(xpu, SHAS[0])
    assert commit_record(SHAS[0], xpu).runs == 0
    tested = TestedCommit.objects.get()
    assert (tested.per_test, tested.tests_total, tested.failing) == (True, 50, False)
    assert not TestRun.objects.exists()


def test_recording_a_commit_twice_writes_and_steps_nothing_twice(xpu):
    job(xpu, SHAS[0], "failure", [ADD])
    commit_record(SHAS[0], xpu)
    again = commit_record(SHAS[0], xpu)
    assert (again.runs, again.steps, TestRun.objects.count(), health(xpu).failing_streak) == (0, 0, 1, 1)


def test_a_test_that_passes_on_retry_is_flaky_with_its_pass_on_retry_counted(xpu):
    job(xpu, SHAS[0], "failure", [ADD])
    commit_record(SHAS[0], xpu)
    assert (health(xpu).state, health(xpu).failing_streak) == ("healthy", 1)
    job(xpu, SHAS[0], "success", attempt=2)
    commit_record(SHAS[0], xpu)
    row = health(xpu)
    assert (row.state, row.pass_on_retry, row.fail_on_retry, row.failing_streak, row.flaky_commits) == (
        "flaky",
        1,
        0,
        0,
        1,
    )


def test_a_test_failing_again_on_retry_counts_fail_on_retry_and_the_commit_once(xpu):
    job(xpu, SHAS[0], "failure", [ADD])
    commit_record(SHAS[0], xpu)
    job(xpu, SHAS[0], "failure", [ADD], attempt=2)
    commit_record(SHAS[0], xpu)
    row = health(xpu)
    assert (row.state, row.fail_on_retry, row.failing_streak, row.steps) == ("healthy", 1, 1, 1)


def test_three_consecutive_failing_commits_make_it_broken_and_clean_passes_heal_it(xpu, settings):
    settings.CRCR_TEST_HEALED_AFTER = 2
    for sha in SHAS[:3]:
        job(xpu, sha, "failure", [ADD], run_id=sha[:6])
        commit_record(sha, xpu)
    assert health(xpu).state == "broken"
    job(xpu, SHAS[3], run_id="p1")
    commit_record(SHAS[3], xpu)
    assert (health(xpu).state, health(xpu).passing_streak) == ("broken", 1)
    job(xpu, SHAS[4], run_id="p2")
    commit_record(SHAS[4], xpu)
    assert (health(xpu).state, health(xpu).since_sha) == ("healthy", SHAS[4])


def test_a_pr_that_breaks_a_test_does_not_make_it_broken_nor_does_a_pr_s_pass_heal_it(xpu, settings):
    """A PR head carries its own change: three pushes of a PR failing test_add say nothing of
    test_add on trunk (the sandbox showed trunk's broken test read '1 clean pass since' after a PR
    based before the break passed it)."""
    settings.CRCR_TEST_HEALED_AFTER = 1
    for sha in SHAS[:3]:
        job(xpu, sha, "failure", [ADD], run_id=sha[:6], event_type="pull_request", pr_number=7)
        commit_record(sha, xpu)
    assert not TestHealth.objects.filter(state="broken").exists()
    trunk = [f"{n:x}" * 40 for n in range(6, 9)]
    for sha in trunk:
        job(xpu, sha, "failure", [ADD], run_id=sha[:6])
        commit_record(sha, xpu)
    assert health(xpu).state == "broken"
    job(xpu, "e" * 40, run_id="pr-pass", event_type="pull_request", pr_number=8)
    commit_record("e" * 40, xpu)
    assert (health(xpu).state, health(xpu).passing_streak) == ("broken", 0)


def test_a_trunk_commit_steps_the_streak_whatever_event_its_imported_run_names(xpu):
    """The reference comes from upstream's own pull.yml, whose runs on a trunk push can read
    pull_request: the relay heard the commit pushed to trunk, and that decides."""
    from relay.models import UpstreamCommit

    for sha in SHAS[:3]:
        UpstreamCommit.objects.create(sha=sha, is_trunk=True)
        job(xpu, sha, "failure", [ADD], run_id=sha[:6], event_type="pull_request", ended_by="imported")
        commit_record(sha, xpu)
    assert (health(xpu).state, health(xpu).failing_streak) == ("broken", 3)


def test_passing_and_failing_on_one_pr_head_is_flaky_all_the_same(xpu):
    job(xpu, SHAS[0], "failure", [ADD], event_type="pull_request", pr_number=7)
    job(xpu, SHAS[0], "success", attempt=2, event_type="pull_request", pr_number=7)
    commit_record(SHAS[0], xpu)
    assert (health(xpu).state, health(xpu).pass_on_retry) == ("flaky", 1)


def test_a_pass_without_per_test_results_says_nothing_and_heals_nothing(xpu):
    job(xpu, SHAS[0], "failure", [ADD])
    commit_record(SHAS[0], xpu)
    job(xpu, SHAS[1], run_id="p1", tests_total=None)
    commit_record(SHAS[1], xpu)
    assert health(xpu).failing_streak == 1


def test_a_commit_still_running_is_written_but_not_stepped(xpu):
    job(xpu, SHAS[0], "failure", [ADD])
    job(xpu, SHAS[0], "", name="shard 2", status=JobRun.Status.IN_PROGRESS, run_id="101")
    assert (commit_record(SHAS[0], xpu).runs, commit_record(SHAS[0], xpu).steps) == (1, 0)
    assert not TestHealth.objects.exists()


def test_a_failing_shard_beside_a_passing_one_is_the_failing_shard_s_test(xpu):
    """A test lives in one shard: the other shard's not listing it is no pass of it."""
    job(xpu, SHAS[0], "failure", [ADD], name="shard 1")
    job(xpu, SHAS[0], "success", name="shard 2", run_id="101")
    commit_record(SHAS[0], xpu)
    assert (health(xpu).state, health(xpu).failing_streak) == ("healthy", 1)


def test_the_sweep_records_every_commit_whose_jobs_finished_since_its_last_run(xpu):
    job(xpu, SHAS[0], "failure", [ADD, MUL])
    job(ProjectFactory(level="L1"), SHAS[0], "failure", [ADD])
    assert store_sweep() == 1
    assert TestRun.objects.count() == 2
    assert store_sweep(timezone.now() + timedelta(minutes=10)) == 0  # nothing finished since


def test_retention_keeps_the_configured_days_of_outcomes_and_the_states(xpu, settings):
    old = job(xpu, SHAS[0], "failure", [ADD], created_at=timezone.now() - timedelta(days=100))
    commit_record(SHAS[0], xpu)
    TestRun.objects.update(created_at=old.created_at)
    TestedCommit.objects.update(created_at=old.created_at)
    job(xpu, SHAS[1], "failure", [MUL], run_id="p1")
    commit_record(SHAS[1], xpu)
    assert retention_sweep()["test_runs"] == 2  # the old outcome, then its tested commit
    assert list(TestRun.objects.values_list("sha", flat=True)) == [SHAS[1]]
    assert TestHealth.objects.count() == 2 and TestIdentity.objects.count() == 2
    settings.CRCR_RETENTION_TEST_DAYS = 0
    TestRun.objects.update(created_at=old.created_at)
    assert retention_sweep()["test_runs"] == 0


def test_after_a_rule_change_rematch_re_keys_the_store_and_replays_the_states(xpu):
    riscv = ProjectFactory(full_name="riscv/pytorch-riscv-ci")
    cpu_add = {"classname": "test_ops.TestCommonCPU", "name": "test_add_cpu_float32", "file": "test/test_ops.py"}
    failing = job(riscv, SHAS[0], "failure", [cpu_add])
    commit_record(SHAS[0], riscv)
    # As the fixed-list rule stored it: the CPU suffix kept.
    old = TestIdentity.objects.create(
        digest="0" * 40, identity="test_ops.TestCommonCPU.test_add_cpu_float32", method="x"
    )
    TestRun.objects.update(identity=old)
    TestHealth.objects.update(identity=old)
    assert store_rematch(write=False) == (1, 1)
    assert store_rematch() == (1, 1)
    run = TestRun.objects.get(job_run=failing)
    assert run.identity.identity == "test_ops.TestCommon.test_add_float32"
    assert health(riscv).failing_streak == 1 and not TestHealth.objects.filter(identity=old).exists()
    assert store_rematch() == (0, 0)
