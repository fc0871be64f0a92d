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


class Conn:
    """A kept-alive connection with `buffered` bytes read ahead and a socket that never turns readable."""

    def __init__(self, buffered: bytes = b""):
        import io
        import socket

        self.is_http2 = False
        self.sock, self.peer = socket.socketpair()  # the peer sends nothing
        self.parser = type("Parser", (), {"unreader": type("Unreader", (), {"buf": io.BytesIO(buffered)})()})()


def lingering_worker(queued: int = 0) -> ThreadWorker:
    import queue

    worker = new_worker()
    worker.alive = True
    work = queue.SimpleQueue()
    for _ in range(queued):
        work.put(object())
    worker.tpool = type("Pool", (), {"_work_queue": work})()
    return worker


def test_a_next_request_already_read_is_served_by_the_same_thread():
    assert lingering_worker()._next_request_here(Conn(b"GET / HTTP/1.1\r\n"))


def test_a_connection_silent_past_the_linger_goes_back_to_the_poller():
    assert not lingering_worker()._next_request_here(Conn())


def test_a_connection_waiting_for_a_thread_sends_this_one_back_to_the_poller():
    assert not lingering_worker(queued=1)._next_request_here(Conn(b"GET / HTTP/1.1\r\n"))


def test_a_stopping_worker_does_not_linger():
    worker = lingering_worker()
    worker.alive = False
    assert not worker._next_request_here(Conn(b"GET / HTTP/1.1\r\n"))
