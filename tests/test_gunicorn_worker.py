"""crcr.gunicorn_worker: the gthread worker's heartbeat at most every HEARTBEAT_SECONDS, and
never missing from a turning loop for longer."""

from crcr import gunicorn_worker
from crcr.gunicorn_worker import HEARTBEAT_SECONDS, ThreadWorker


class Beats:
    def __init__(self):
        self.count = 0

    def notify(self):
        self.count += 1


def new_worker() -> ThreadWorker:
    worker = ThreadWorker.__new__(ThreadWorker)  # no sockets or arbiter: only notify is under test
    worker.tmp = Beats()
    return worker


def test_many_turns_of_the_loop_within_the_interval_beat_once(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(gunicorn_worker.time, "monotonic", lambda: clock[0])
    worker = new_worker()
    for _ in range(50):
        worker.notify()
        clock[0] += HEARTBEAT_SECONDS / 100
    assert worker.tmp.count == 1


def test_a_turn_after_the_interval_beats_again(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(gunicorn_worker.time, "monotonic", lambda: clock[0])
    worker = new_worker()
    worker.notify()
    clock[0] += HEARTBEAT_SECONDS
    worker.notify()
    assert worker.tmp.count == 2


def test_the_production_configuration_runs_this_worker():
    from crcr import gunicorn_conf

    assert gunicorn_conf.worker_class == "crcr.gunicorn_worker.ThreadWorker"
