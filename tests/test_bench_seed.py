"""bench_seed streams: the rows it writes do not depend on how many it holds at once."""

import pytest

from devtools.bench import seed as bench_seed
from relay.models import FailedTest, JobRun

NOW = 1_780_000_000.0


def snapshot() -> tuple:
    jobs = list(
        JobRun.objects.order_by("id").values_list("id", "dispatch_id", "delivery_key", "job_name", "created_at")
    )
    failed = list(FailedTest.objects.order_by("id").values_list("id", "job_run_id", "name"))
    return jobs, failed


@pytest.mark.django_db(transaction=True)  # the seeder empties tables with TRUNCATE
def test_the_rows_are_the_same_whatever_the_chunk_and_ids_follow_arrival(monkeypatch):
    bench_seed.seed(4000, reset=True, now=NOW)
    whole = snapshot()
    monkeypatch.setattr(bench_seed, "JOB_CHUNK", 700)
    bench_seed.seed(4000, reset=True, now=NOW)
    assert snapshot() == whole
    arrival = [created for _, _, _, _, created in whole[0]]
    assert arrival == sorted(arrival) and len(whole[0]) >= 4000 and whole[1]
