"""make bench's bisection figures run through the real search and meet their targets: k commits in
ceil(log2 k) + 2 dispatches, the budget never exceeded, two backends never mixed, a restart resumed."""

import pytest

from devtools.bench.bisection import RANGES, bisection
from relay.models import Bisection

pytestmark = pytest.mark.django_db


class Recorder:
    def __init__(self):
        self.results = {}

    def add(self, key, label, value, unit, target="", ok=None, **details):
        self.results[key] = (value, ok)


def test_every_bisection_figure_is_met_and_the_database_keeps_none_of_it():
    recorder = Recorder()
    bisection(recorder)
    assert {key: ok for key, (_, ok) in recorder.results.items()} == {
        **{f"bisect_dispatches_k{k}": True for k in RANGES},
        "bisect_budget": True,
        "bisect_isolation": True,
        "bisect_restart": True,
    }
    assert recorder.results["bisect_dispatches_k64"][0] == 8
    assert recorder.results["bisect_dispatches_k12"][0] == 6
    assert not Bisection.objects.exists()
