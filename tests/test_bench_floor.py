"""The callback's floor (devtools/bench/figures.py, `callback_floor`): the callbacks and the empty
view take turns, and each ratio comes from neighbouring rounds. Fakes for the servers and the CPU
clock: nothing here times anything (the goal is judged in `make bench` only)."""

from devtools.bench import figures

ANSWERS = 100
"""Answers per fake round."""


class FakeWatch:
    """The web's CPU seconds so far, as MachineWatch.cpu() reports them (part → pid → seconds)."""

    def __init__(self):
        self.web = 0.0

    def begin(self):
        pass

    def report(self):
        return {}

    def cpu(self):
        return {"web": {1: self.web}}


class FakeWorld:
    def __init__(self):
        self.asked = []

    def jobs(self, count):
        self.asked.append(count)
        return [object()] * count


def bench_with(monkeypatch, slowdowns, ms_each):
    """A tiny-profile Bench whose rounds cost `ms_each[path kind]` of web CPU per answer, times the
    host's slowdown for that round (one per round, in order)."""
    b = figures.Bench.__new__(figures.Bench)
    b.profile, b.results, b.log, b.machine, b.unjudged = figures.PROFILES["tiny"], [], lambda *a: None, None, ""
    b.watch = FakeWatch()
    slowdown = iter(slowdowns)

    def run(_b, jobs, seconds, clients, path="/github/callback", base_url=None):
        side = "callback" if path == "/github/callback" else "floor"
        accepted = ANSWERS if side == "callback" else 3 * ANSWERS  # the empty view answers faster
        b.watch.web += ms_each[side] * next(slowdown) * accepted / 1000
        return {
            "accepted": accepted,
            "elapsed": seconds,
            "records": [None] * accepted,
            "errors": [],
            "latencies": [0.01] * accepted,
            "exhausted": [],
        }

    monkeypatch.setattr(figures, "callback_run", run)
    monkeypatch.setattr(figures, "servers_quiet", lambda b: 0.5)
    return b


def figure(b, key):
    return next(r for r in b.results if r.key == key)


def test_a_host_that_slows_between_pairs_does_not_move_the_ratio(monkeypatch):
    b = bench_with(monkeypatch, slowdowns=[1, 1, 2, 2], ms_each={"callback": 3.0, "floor": 1.0})
    figures.callback_floor(b, FakeWorld(), jobs=[], rate=400.0)
    ratio = figure(b, "callback_floor_ratio")
    assert ratio.details["pair_ratios"] == [3.0, 3.0]
    assert ratio.value == 3.0 and ratio.verdict == "missed"
    assert [r["side"] for r in ratio.details["rounds"]] == ["callback", "floor", "floor", "callback"]


def test_each_callback_round_gets_jobs_minted_for_it(monkeypatch):
    world = FakeWorld()
    b = bench_with(monkeypatch, slowdowns=[1, 1, 1, 1], ms_each={"callback": 1.5, "floor": 1.0})
    figures.callback_floor(b, world, jobs=[], rate=400.0)
    assert world.asked == [figures.jobs_for(400.0, b.profile.floor_round_seconds)] * b.profile.floor_pairs


def test_the_rates_ratio_is_paired_too(monkeypatch):
    b = bench_with(monkeypatch, slowdowns=[1, 1, 1, 1], ms_each={"callback": 1.5, "floor": 1.0})
    figures.callback_floor(b, FakeWorld(), jobs=[], rate=400.0)
    assert figure(b, "callback_floor_rate_ratio").details["pair_ratios"] == [0.333, 0.333]
    assert figure(b, "callback_floor_ratio").verdict == "met"
    assert figure(b, "floor_cpu").value == 1.0
