"""gunicorn's production settings (`gunicorn -c python:crcr.gunicorn_conf crcr.wsgi:application`),
used by the image and docker-compose alike, so the timeouts are set in one place.

gthread workers hold one thread per request from its headers to its answer, so a client that
sends slowly holds a thread: `WEB_CONCURRENCY` × `GUNICORN_THREADS` slow clients would starve the
web tier. What bounds them here:
- gunicorn (27) gives a connection 5 s to start sending before it goes back to the poller, and a
  kept-alive connection `keepalive` seconds between requests;
- the app reads a request body within `CRCR_BODY_READ_SECONDS` (crcr/wsgi.py) or answers 408;
- `timeout` restarts a worker whose main loop stops answering; `graceful_timeout` bounds a
  restart's wait for requests in flight.
Production still belongs behind a buffering reverse proxy (docs/admins.md, "Reverse proxy"),
which reads whole requests before gunicorn sees them; these bounds are the fallback.

Prometheus: every worker process counts its callbacks' answers (relay/health/metrics.py) in
prometheus_client's multiprocess mode, in PROMETHEUS_MULTIPROC_DIR (a fresh directory for this
server unless one is given; emptied when the server starts, so counters start from zero as
Prometheus expects after a restart), and /metrics adds them up."""

import os
import tempfile
from pathlib import Path

bind = os.environ.get("GUNICORN_BIND", "0.0.0.0:8000")
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
threads = int(os.environ.get("GUNICORN_THREADS", "4"))
worker_class = "crcr.gunicorn_worker.ThreadWorker"  # gthread, its heartbeat throttled
timeout = 30
graceful_timeout = 30
keepalive = 5
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190


def on_starting(server):
    """Before any worker forks (and so before one imports prometheus_client): the counters'
    directory, a fresh one unless named; of one an operator named, only prometheus_client's own
    files (*.db) go."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="crcr-prometheus-")
    directory = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink(missing_ok=True)


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
