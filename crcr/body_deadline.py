"""Request bodies arrive within CRCR_BODY_READ_SECONDS, or the read stops.

gunicorn's gthread worker reads a body with blocking receives and no deadline, so a client that
sends a byte now and then holds a thread for as long as it likes. This WSGI wrapper gives every
request with a body a deadline. One watchdog thread keeps the deadlines; at one, it shuts the
socket's reading side, which ends the blocked receive at once, and the next read of the body
raises relay.inputs.bodies.BodyTooSlow (a 408). The answer still goes out (only reading was shut), and
the connection closes after it. Outside gunicorn (no `gunicorn.socket`) nothing changes."""

import heapq
import itertools
import socket
import threading
import time

from django.conf import settings

from relay.inputs.bodies import BodyTooSlow


class _Watch:
    __slots__ = ("sock", "expired", "done")

    def __init__(self, sock):
        self.sock, self.expired, self.done = sock, False, False


class _Watchdog:
    def __init__(self):
        self._heap: list[tuple[float, int, _Watch]] = []
        self._count = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, sock, seconds: float) -> _Watch:
        watch = _Watch(sock)
        with self._wake:
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._count), watch))
            if self._thread is None or not self._thread.is_alive():  # a forked worker starts its own
                self._thread = threading.Thread(target=self._run, name="body-deadline", daemon=True)
                self._thread.start()
            # Every deadline is the same length from now, so a new one is nearly always the latest:
            # the watchdog, asleep until the earliest, is woken only when this one comes first.
            if self._heap[0][2] is watch:
                self._wake.notify()
        return watch

    def _run(self):
        while True:
            with self._wake:
                while not self._heap:
                    self._wake.wait()
                due, _, watch = self._heap[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self._wake.wait(timeout=wait)
                    continue
                heapq.heappop(self._heap)
            if not watch.done:
                _expire(watch)


def _expire(watch: _Watch) -> None:
    watch.expired = True
    try:
        watch.sock.shutdown(socket.SHUT_RD)
    except OSError:  # already closed
        pass


WATCHDOG = _Watchdog()


class _DeadlineInput:
    """wsgi.input whose reads fail with BodyTooSlow once the watchdog expired them."""

    def __init__(self, inner, watch: _Watch, seconds: float):
        self._inner, self._watch, self._seconds = inner, watch, seconds

    def _checked(self, method, *args):
        try:
            data = method(*args)
        except OSError:
            if self._watch.expired:
                raise self._too_slow() from None
            raise
        if self._watch.expired:
            raise self._too_slow()
        return data

    def _too_slow(self) -> BodyTooSlow:
        return BodyTooSlow(f"the request body did not arrive within {self._seconds:g} s")

    def read(self, *args):
        return self._checked(self._inner.read, *args)

    def readline(self, *args):
        return self._checked(self._inner.readline, *args)

    def readlines(self, *args):
        return self._checked(self._inner.readlines, *args)

    def __iter__(self):
        return iter(self.readline, b"")


class BodyDeadline:
    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        sock = environ.get("gunicorn.socket")
        if sock is None or not _has_body(environ):
            return self.app(environ, start_response)
        seconds = settings.CRCR_BODY_READ_SECONDS
        watch = WATCHDOG.watch(sock, seconds)
        environ["wsgi.input"] = _DeadlineInput(environ["wsgi.input"], watch, seconds)
        try:
            return self.app(environ, start_response)
        finally:
            watch.done = True


def _has_body(environ) -> bool:
    return environ.get("CONTENT_LENGTH", "") not in ("", "0") or "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "")
