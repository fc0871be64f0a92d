"""make bench's causes figures measure what they say: every failure of the seeded test store
clustered for the page, the page answering with the backend's causes, and the sweep clustering
exactly the job's 1,000 failures, in the reasons they were written to be."""

from types import SimpleNamespace

import pytest

from devtools.bench.causes import MESSAGES, causes
from devtools.bench.teststore import SCALE, seed
from relay.models import CauseHit, Project, TestRun
from relay.policy.reasons import MISSING_OPERATOR, REASON, reason_of

pytestmark = pytest.mark.django_db


class Recorder:
    profile = SimpleNamespace(name="tiny")

    def __init__(self):
        self.results = {}

    def add(self, key, label, value, unit, target="", ok=None, **details):
        self.results[key] = (value, ok, details)


def test_the_figures_cluster_every_stored_failure_and_exactly_one_job_s_thousand():
    seed(*SCALE["tiny"])
    recorder = Recorder()
    causes(recorder)
    assert set(recorder.results) == {
        "causes_seed",
        "causes_page",
        "causes_api",
        "causes_backend_page",
        "causes_cluster",
    }
    assert CauseHit.objects.count() == TestRun.objects.count() == recorder.results["causes_seed"][2]["hits"] + 3000
    assert all(value > 0 for key, (value, _, _) in recorder.results.items() if key != "causes_seed")
    assert not Project.objects.filter(is_reference=True).exists(), "the stand-in reference is put back"


def test_the_thousand_failures_read_as_missing_operators_and_reasons():
    assert {reason_of(message.format(k=5, op=3)).kind for message in MESSAGES} == {MISSING_OPERATOR, REASON}
