"""gunicorn's gthread worker with its heartbeat kept to a few a second.

The gthread worker tells the arbiter it is alive on every turn of its event loop, and a busy
keep-alive connection turns the loop about twice per request: each heartbeat is an `os.utime` on
the worker's temp file, which was a tenth of the worker's busy time under the callback benchmark
(docs/performance.md, "Where each millisecond goes"). The arbiter only needs one within `timeout`
(30 s), so a heartbeat at most every HEARTBEAT_SECONDS keeps its watch exactly as it was; a loop
that stops turning still stops beating and is restarted as before."""

import time

from gunicorn.workers.gthread import ThreadWorker as GThreadWorker

HEARTBEAT_SECONDS = 0.5


class ThreadWorker(GThreadWorker):
    _beat_at = 0.0

    def notify(self):
        now = time.monotonic()
        if now - self._beat_at >= HEARTBEAT_SECONDS:
            self._beat_at = now
            super().notify()
