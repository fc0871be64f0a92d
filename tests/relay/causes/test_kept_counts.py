"""The counts kept beside the hits (relay/teststore/cause_counts.py) answer exactly what the hits answer:
for every backend, kind and window edge, after the sweep wrote a job's failures in two steps,
after a re-clustering, after retention, and after the migration filled them from stored hits."""

import importlib
from datetime import timedelta

import pytest
from django.db import connection

from relay.models import CauseCommit, CauseRun, CauseTest
from relay.policy import reasons
from relay.results.causes import CauseQuery, _hit_totals, _totals
from relay.teststore import causes as sweep
from relay.teststore.cause_counts import cause_counts_write
from relay.teststore.causes import causes_sweep
from relay.teststore.store import store_sweep
from tests.factories import UpstreamCommitFactory

from .conftest import CLOSE, failing, ran

pytestmark = pytest.mark.django_db


def by_cause(rows: list[dict]) -> dict:
    return {r["cause_id"]: (r["tests"], r["failures"], r["commits"], r["runs"], r["last"]) for r in rows}


def queries(world):
    backends = [
        (),
        (world["xpu"].pk,),
        (world["npu"].pk,),
        (world["reference"].pk,),
        (world["xpu"].pk, world["npu"].pk),
    ]
    for project_ids in backends:
        for kind in ("", "missing_operator", "reason"):
            yield CauseQuery(project_ids=project_ids, kind=kind)
    yield CauseQuery(operator="aten::_fft_c2c")


def edges(world):
    """Window starts before, between and after the world's commits (a job's hits at landed + 1 min)."""
    for commit in world["commits"]:
        at = commit.landed_at + timedelta(minutes=1)
        yield from (at - timedelta(seconds=1), at, at + timedelta(seconds=1))


def assert_kept_counts_answer_as_the_hits(world):
    for query in queries(world):
        for since in edges(world):
            assert by_cause(_totals(query, since)) == by_cause(_hit_totals(query, since)), (query, since)


def test_every_window_edge_and_filter_counts_as_the_hits_do(world):
    assert_kept_counts_answer_as_the_hits(world)


def test_a_job_written_in_two_steps_counts_its_failures_once_each(world, monkeypatch):
    monkeypatch.setattr(sweep, "BATCH", 4)
    commit = UpstreamCommitFactory(landed_at=world["commits"][-1].landed_at + timedelta(hours=1), is_trunk=True)
    ran(world["xpu"], commit, [failing("XPU", "xpu", f"test_conv_{i}", CLOSE.format(n=i)) for i in range(7)])
    store_sweep(now=commit.landed_at + timedelta(minutes=5))
    causes_sweep()
    causes_sweep()  # and once more: nothing changes
    [run] = CauseRun.objects.filter(sha=commit.sha)
    assert run.failures == 7
    assert_kept_counts_answer_as_the_hits(world)


def test_a_new_version_keeps_its_own_counts(world, monkeypatch):
    monkeypatch.setattr(reasons, "VERSION", 2)
    monkeypatch.setattr(sweep, "VERSION", 2)
    monkeypatch.setattr(sweep, "BATCH", 10)
    causes_sweep()
    assert set(CauseRun.objects.values_list("version", flat=True)) == {2}, "the old version's went with its causes"
    assert_kept_counts_answer_as_the_hits(world)


def test_retention_keeps_the_counts_of_what_it_keeps(world, settings):
    from relay.ops.retention import test_store_prune

    second = world["commits"][1].landed_at + timedelta(minutes=1)
    while test_store_prune(second):
        pass
    assert not CauseRun.objects.filter(created_at__lt=second).exists()
    assert not CauseTest.objects.filter(last_at__lt=second).exists()
    assert_kept_counts_answer_as_the_hits(world)


def test_writing_the_counts_again_changes_nothing(world):
    before = {m: sorted(m.objects.values_list(*_fields(m))) for m in (CauseRun, CauseCommit, CauseTest)}
    cause_counts_write(reasons.VERSION)
    assert {m: sorted(m.objects.values_list(*_fields(m))) for m in (CauseRun, CauseCommit, CauseTest)} == before


def test_the_migration_fills_them_from_the_hits_already_stored(world):
    migration = importlib.import_module("relay.migrations.0031_causes_kept_counts")
    for model in (CauseRun, CauseCommit, CauseTest):
        model.objects.all().delete()
    migration.counts_from_hits(None, type("Editor", (), {"connection": connection})())
    assert_kept_counts_answer_as_the_hits(world)


def test_the_missing_operator_s_world_is_what_the_counts_say(world):
    """The counts themselves, not only their agreement: XPU's missing operator on 3 tests, 3
    commits, 3 runs; across backends 5 tests (XPU's 3 and Ascend's 2)."""
    since = world["commits"][0].landed_at - timedelta(hours=1)
    xpu = by_cause(_totals(CauseQuery(project_ids=(world["xpu"].pk,), kind="missing_operator"), since))
    every = by_cause(_totals(CauseQuery(kind="missing_operator"), since))
    assert [v[:4] for v in xpu.values()] == [(3, 9, 3, 3)]
    assert [v[:4] for v in every.values()] == [(5, 15, 3, 6)]


def _fields(model) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields if f.attname != "id"]
