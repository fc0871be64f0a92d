"""Backends × integration paths against the reference, one backend's modules, its newly skipped
modules, its un-skip candidates and its history: true to the counts its reports carried."""

import pytest

from relay.enablement import table
from relay.enablement.backend import backend_enablement, enabled_history, skip_rises
from relay.enablement.table import CountedOn, counted_commits, enablement_table
from relay.models import CountedCommit, ModuleCount
from tests.factories import FailedTestFactory, ProjectFactory
from tests.relay.enablement.scenario import backends, commit, job

pytestmark = pytest.mark.django_db

REFERENCE_COUNTS = {
    "test_ops.TestCommonPRIVATEUSE1": {"passed": 100, "skipped": 5},
    "test_nn": {"passed": 50, "failed": 2},
    "distributed/test_c10d.py": {"passed": 20},
}
BACKEND_COUNTS = {
    "test/test_ops.py": {"passed": 80, "failed": 5, "skipped": 20},
    "test.test_nn": {"passed": 55, "xfailed": 3},
}


@pytest.fixture
def store():
    reference, backend = backends()
    old, newest = commit(10), commit(1)
    job(reference, newest.sha, REFERENCE_COUNTS)
    job(backend, newest.sha, BACKEND_COUNTS)
    job(backend, old.sha, {"test/test_ops.py": {"passed": 60, "skipped": 5}})
    return reference, backend, old, newest


def cells(row) -> dict:
    return {cell.path: cell for cell in row.cells}


def test_the_reference_comes_first_and_each_cell_is_true_to_the_counts(store):
    reference, backend, old, newest = store
    table = enablement_table()
    assert [row.project for row in table.rows] == [reference, backend]
    assert table.rows[1].commit.sha == newest.sha and table.rows[1].reference_commit.sha == newest.sha
    mine = cells(table.rows[1])
    eager, nn, distributed = mine["eager ops"], mine["nn"], mine["distributed"]
    assert (eager.counts.passed, eager.counts.ran, eager.parity) == (80, 85, 0.8)
    assert (nn.counts.passed, nn.counts.ran, nn.parity) == (55, 58, 1.0), "parity never passes 100 %"
    assert (distributed.counts.ran, distributed.parity) == (0, 0.0)
    assert mine["autograd"].parity is None, "the reference passes nothing there"
    assert (eager.trend, nn.trend) == (20, 55)
    ref = cells(table.rows[0])
    assert (ref["eager ops"].counts.passed, ref["eager ops"].parity) == (100, 1.0)


def test_without_an_older_commit_a_week_back_there_is_no_trend(store):
    reference, backend, old, newest = store
    old.delete()
    assert cells(enablement_table().rows[1])["eager ops"].trend is None


def test_a_rerun_replaces_its_first_attempts_counts(store):
    reference, backend, old, newest = store
    job(backend, newest.sha, {"test/test_ops.py": {"passed": 84, "failed": 1, "skipped": 20}}, attempt=2)
    eager = cells(enablement_table().rows[1])["eager ops"]
    assert (eager.counts.passed, eager.counts.ran) == (84, 85)


def test_a_backend_is_read_beside_the_references_newest_when_the_reference_lacks_its_commit(store):
    reference, backend, old, newest = store
    latest = commit(0.5)
    job(backend, latest.sha, {"test_ops": {"passed": 90}})
    row = enablement_table().rows[1]
    assert (row.commit.sha, row.reference_commit.sha) == (latest.sha, newest.sha)
    assert cells(row)["eager ops"].parity == 0.9


def test_a_walk_a_commit_at_a_time_finds_the_newest_and_the_trend_s_commit_past_uncounted_ones(store, monkeypatch):
    """Trunk commits none of the backends counted lie between theirs: the table, walking the trunk
    a page at a time, still reads each backend's newest, the reference's same commit and the
    commit a week back its trend compares with."""
    reference, backend, old, newest = store
    for days in (0.5, 2, 5, 8, 12):
        commit(days)
    monkeypatch.setattr(table, "PAGES", (1, 2))
    row = enablement_table().rows[1]
    assert (row.commit.sha, row.reference_commit.sha) == (newest.sha, newest.sha)
    assert (cells(row)["eager ops"].trend, cells(row)["nn"].trend) == (20, 55), "against the commit 10 days back"
    assert counted_commits([backend.pk], newest.landed_at, enough=lambda _, found: False)[backend.pk] == [
        CountedOn(newest.sha, newest.landed_at),
        CountedOn(old.sha, old.landed_at),
    ]


def test_the_reference_s_same_commit_is_found_beyond_its_own_walk(store, monkeypatch):
    """The backend's newest is older than the reference's first page: still read beside the
    reference's counts on that very commit, not its newest."""
    reference, backend, old, newest = store
    for sha in (commit(0.5).sha, commit(8).sha, old.sha):
        job(reference, sha, REFERENCE_COUNTS)
    ModuleCount.objects.filter(project=backend, sha=newest.sha).delete()
    CountedCommit.objects.filter(project=backend, sha=newest.sha).delete()
    monkeypatch.setattr(table, "PAGES", (1, 3))  # the reference's walk ends at 8 days, a week from its newest
    row = enablement_table().rows[1]
    assert row.commit.sha == old.sha and row.reference_commit.sha == old.sha


def test_a_pr_heads_counts_are_not_trunks(store):
    reference, backend, old, newest = store
    head = commit(0.1, trunk=False)
    job(backend, head.sha, {"test_ops": {"passed": 1}})
    assert enablement_table().rows[1].commit.sha == newest.sha
    assert head.sha not in {c.sha for c in counted_commits([backend.pk], head.landed_at)[backend.pk]}


def test_a_backend_without_counts_has_a_row_without_cells(store):
    from tests.factories import ProjectFactory

    quiet = ProjectFactory(full_name="acme/npu-ci")
    rows = {row.project: row for row in enablement_table().rows}
    assert rows[quiet].commit is None and rows[quiet].cells == []


def test_the_backends_modules_sit_beside_the_references(store):
    reference, backend, old, newest = store
    view = backend_enablement(backend, reference)
    lines = {line.module: line for line in view.modules}
    assert set(lines) == {"test_ops", "test_nn"}
    assert (lines["test_ops"].path, lines["test_ops"].reference.passed) == ("eager ops", 100)
    assert [line.module for line in backend_enablement(backend, reference, "nn").modules] == ["test_nn"]


def test_a_module_skipping_more_on_a_trunk_commit_reads_since_that_commit(store):
    reference, backend, old, newest = store
    view = backend_enablement(backend, reference)
    rise = {line.module: line.rise for line in view.modules}["test_ops"]
    assert (rise.added, rise.sha) == (15, newest.sha)


def test_a_rise_is_named_by_its_commit_and_counted_from_before_it_and_expected_failures_count():
    reference, backend = backends()
    first, broke, later = commit(3), commit(2), commit(1)
    job(backend, first.sha, {"test_ops": {"passed": 10, "skipped": 2}, "test_nn": {"passed": 5, "skipped": 4}})
    job(backend, broke.sha, {"test_ops": {"passed": 6, "skipped": 4, "xfailed": 2}, "test_nn": {"passed": 9}})
    job(backend, later.sha, {"test_ops": {"passed": 6, "skipped": 6}, "test_nn": {"passed": 9}})
    counted = counted_commits([backend.pk], later.landed_at)[backend.pk]
    rises = skip_rises(backend, counted)
    assert set(rises) == {"test_ops"}, "test_nn skips fewer"
    assert (rises["test_ops"].added, rises["test_ops"].sha) == (4, broke.sha)


def test_tests_passing_while_expected_to_fail_are_candidates_to_unskip(store):
    reference, backend, old, newest = store
    (latest,) = [j for j in backend.job_runs.all() if j.head_sha == newest.sha]
    FailedTestFactory(
        job_run=latest, outcome="xpassed", name="test_foo_xpu_float32", classname="test_ops.TestCommonXPU"
    )
    FailedTestFactory(job_run=latest, outcome="failed", name="test_bar_xpu", classname="test_ops.TestCommonXPU")
    assert backend_enablement(backend, reference).candidates == ["test_ops.TestCommon.test_foo_float32"]


def test_the_history_has_each_days_passed_per_path(store):
    reference, backend, old, newest = store
    points = enabled_history(backend)
    assert [p.sha for p in points] == [old.sha, newest.sha]
    assert [p.passed["eager ops"] for p in points] == [60, 80]
    assert [p.passed["nn"] for p in points] == [0, 55]


# --- hardware variants (issue 53 item 5) ------------------------------------------------------


@pytest.fixture
def rocm_store():
    reference, _ = backends()
    rocm = ProjectFactory(
        full_name="ROCm/pytorch", display_name="AMD ROCm", device_type="cuda", variant_keys=["device"]
    )
    newest = commit(1)
    job(reference, newest.sha, REFERENCE_COUNTS)
    ops = {"test/test_ops.py": {"passed": 90, "failed": 10}}
    job(
        rocm,
        newest.sha,
        ops,
        run_id="mi300",
        job_name="test (mi300)",
        environment={"device": "MI300", "os": "ubuntu-22.04"},
    )
    job(
        rocm,
        newest.sha,
        {"test/test_ops.py": {"passed": 50, "skipped": 50}},
        run_id="mi250",
        environment={"device": "MI250"},
    )
    return rocm


def test_a_backend_declaring_variants_reads_each_variant_beside_the_reference(rocm_store):
    row = next(r for r in enablement_table().rows if r.project == rocm_store)
    assert cells(row)["eager ops"].counts.passed == 140, "the backend's row is every variant's"
    by_variant = {v.variant: {c.path: c for c in v.cells} for v in row.variants}
    assert set(by_variant) == {"MI300", "MI250"}
    mi300, mi250 = by_variant["MI300"]["eager ops"], by_variant["MI250"]["eager ops"]
    assert (mi300.counts.passed, mi300.counts.ran, mi300.parity) == (90, 100, 0.9)
    assert (mi250.counts.passed, mi250.counts.ran, mi250.counts.skipped, mi250.parity) == (50, 50, 50, 0.5)


def test_without_declared_keys_there_is_one_row(rocm_store):
    rocm_store.variant_keys = []
    rocm_store.save()
    row = next(r for r in enablement_table().rows if r.project == rocm_store)
    assert row.variants == []
