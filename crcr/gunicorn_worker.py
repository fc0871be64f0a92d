"""gunicorn's gthread worker with its heartbeat kept to a few a second, and a busy kept-alive
connection served by the thread that answered it.

The gthread worker tells the arbiter it is alive on every turn of its event loop, and a busy
keep-alive connection turns the loop about twice per request: each heartbeat is an `os.utime` on
the worker's temp file, which was a tenth of the worker's busy time under the callback benchmark
(docs/performance.md, "Where each millisecond goes"). The arbiter only needs one within `timeout`
(30 s), so a heartbeat at most every HEARTBEAT_SECONDS keeps its watch exactly as it was; a loop
that stops turning still stops beating and is restarted as before.

After each kept-alive answer gthread hands the connection back to its poller, and the next
request comes back to a pool thread through the poller, a future and a pipe: two epoll changes,
a pipe write and read, and two thread switches per request. A client that sends its next request
at once (a reverse proxy's upstream connection, a CI reporter posting in_progress then completed)
is served by the same thread instead, when the request arrives within LINGER_SECONDS and no
other connection waits for a thread; at most LINGER_REQUESTS in a row, so one busy connection
cannot keep a thread from the others."""

import select
import time

from gunicorn.workers.gthread import ThreadWorker as GThreadWorker

HEARTBEAT_SECONDS = 0.5
LINGER_SECONDS = 0.002
LINGER_REQUESTS = 50


class ThreadWorker(GThreadWorker):
    _beat_at = 0.0

    def notify(self):
        now = time.monotonic()
        if now - self._beat_at >= HEARTBEAT_SECONDS:
            self._beat_at = now
            super().notify()

    def handle(self, conn):
        for _ in range(LINGER_REQUESTS):
            keepalive = super().handle(conn)
            if keepalive is not True or not self._next_request_here(conn):
                return keepalive
        return keepalive

    def _next_request_here(self, conn) -> bool:
        """Whether this thread should serve the connection's next request itself."""
        if not self.alive or conn.is_http2 or not self.tpool._work_queue.empty():
            return False
        if conn.parser.unreader.buf.getvalue():
            return True  # a drained body read ahead into the next request
        readable, _, _ = select.select([conn.sock], [], [], LINGER_SECONDS)
        return bool(readable)
