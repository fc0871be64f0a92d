"""Stored failures clustered by reason in the test store's sweep, re-clustered under a new
version with the old clusters kept until every failure has its new one."""

from datetime import timedelta

import pytest
from django.utils import timezone

from relay.models import CauseHit, FailureCause, TestRun
from relay.policy import reasons
from relay.results.causes import read_version
from relay.teststore import causes as sweep
from relay.teststore import tasks
from relay.teststore.causes import causes_sweep

from .conftest import FFT, failing, ran

pytestmark = pytest.mark.django_db
MINUTE = timedelta(minutes=1)


def causes(version=reasons.VERSION):
    return {(c.kind, c.exception, c.signature): c.hits.count() for c in FailureCause.objects.filter(version=version)}


def test_every_stored_failure_gets_one_cause_and_the_world_reads_as_three(world):
    assert CauseHit.objects.count() == TestRun.objects.count() == 3 * (6 + 2 + 1)
    assert causes() == {
        ("missing_operator", "NotImplementedError", "aten::_fft_c2c"): 3 * 5,
        ("reason", "IndexError", "index <n> is out of bounds for dimension <n> with size <n>"): 3 * 2,
        ("reason", "AssertionError", "Tensor-likes are not close!"): 3 * 2,
    }


def test_a_cause_knows_when_it_was_first_and_last_seen(world):
    cause = FailureCause.objects.get(kind="missing_operator")
    first, last = world["commits"][0], world["commits"][-1]
    assert (cause.first_seen_at, cause.last_seen_at) == (first.landed_at + MINUTE, last.landed_at + MINUTE)
    assert cause.operator == "aten::_fft_c2c" and "'XPU' backend" in cause.example


def test_sweeping_again_writes_nothing_twice(world):
    before = CauseHit.objects.count()
    assert causes_sweep() == 0
    assert CauseHit.objects.count() == before


def test_the_store_task_clusters_what_it_stored(world):
    ran(world["npu"], world["commits"][0], [failing("PrivateUse1", "npu", "test_fft_9", FFT.format(key="npu"))], 2)
    tasks.test_store_sweep.apply()
    assert causes()[("missing_operator", "NotImplementedError", "aten::_fft_c2c")] == 3 * 5 + 1


def test_a_new_version_reclusters_and_keeps_the_old_until_done(world, monkeypatch):
    old = causes()
    monkeypatch.setattr(reasons, "VERSION", 2)
    monkeypatch.setattr(sweep, "VERSION", 2)
    monkeypatch.setattr(sweep, "BATCH", 10)
    assert causes_sweep(limit=10) == 10
    assert read_version() == 1 and causes(1) == old  # half done: the pages still read version 1
    assert causes_sweep() == 27 - 10
    assert read_version() == 2 and causes(2) == old and not FailureCause.objects.filter(version=1).exists()


def test_a_failure_whose_message_is_beyond_the_bound_is_clustered_on_what_was_read(world):
    long = failing("XPU", "xpu", "test_huge", "RuntimeError: " + "x" * 50_000)
    ran(world["xpu"], world["commits"][0], [long], attempt=3)
    tasks.test_store_sweep.apply()
    cause = FailureCause.objects.get(exception="RuntimeError")
    assert len(cause.signature) == reasons.MAX_LINE


def test_retention_drops_causes_with_the_test_store_rows_they_were_made_of(world, settings):
    from relay.ops.retention import retention_sweep

    settings.CRCR_RETENTION_TEST_DAYS = 1
    retention_sweep(now=timezone.now() + timedelta(days=2))
    assert not CauseHit.objects.exists() and not FailureCause.objects.exists() and not TestRun.objects.exists()
