"""`manage.py metrics_serve --bind 127.0.0.1:9464`: the /metrics text on a bind address of its own,
with no token, for a deployment that keeps Prometheus on a private network instead of giving it a
bearer token (docs/admins.md, "Alerts and metrics"). Run it with the web tier's
PROMETHEUS_MULTIPROC_DIR to include the web processes' callback counters.

Each connection has a thread of its own and READ_SECONDS to send its request: one idle connection
used to hold the only thread, starving Prometheus until its scrape failed and the alerts fired.
`--bind` is read in ASCII digits only (`٣` was port 3, `³` a crash) and takes `[::1]:9464`."""

import socket
import sys
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connections

from relay.health.exposition import CONTENT_TYPE, exposition
from relay.inputs.params import int_param

READ_SECONDS = 10
"""How long a connection may take to send its request (and to read the answer) before it is closed."""
MAX_CONNECTIONS = 32
"""Connections served at once; the next waits in the listen backlog. Prometheus needs one."""


def application(environ, start_response):
    if environ.get("PATH_INFO", "/") not in ("/", "/metrics"):
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"only /metrics is served here\n"]
    try:
        body, status = exposition(settings.CRCR_METRICS_CACHE_SECONDS), "200 OK"
        headers = [("Content-Type", CONTENT_TYPE)]
    except DatabaseError:
        body, status, headers = b"database unavailable\n", "503 Service Unavailable", [("Content-Type", "text/plain")]
    finally:
        connections.close_all()  # one scrape, one connection: nothing left open between scrapes
    start_response(status, headers)
    return [body]


class QuietHandler(WSGIRequestHandler):
    timeout = READ_SECONDS  # socketserver sets it on the connection: a read that waits longer ends it

    def log_message(self, *args):
        pass


class ThreadingServer(ThreadingMixIn, WSGIServer):
    """A thread per connection, at most MAX_CONNECTIONS at once; none outlives the process."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, *args, **kwargs):
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address):
        self.slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request, client_address):
        if not isinstance(sys.exception(), TimeoutError):  # a client that said nothing in time
            super().handle_error(request, client_address)


class ThreadingServer6(ThreadingServer):
    address_family = socket.AF_INET6


def bind_address(text: str) -> tuple[str, int]:
    """`host:port` or `[v6 address]:port` → (host, port); the port is 0–65535 in ASCII digits
    (0: any free port)."""
    host, _, port = str(text).rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    number = int_param(port, low=0, high=65535)
    if not host or not host.isascii() or number is None or "[" in host or "]" in host:
        raise CommandError(f"--bind wants host:port or [v6 address]:port, the port in ASCII digits; got {text!r}")
    return host, number


def metrics_server(bind: str) -> WSGIServer:
    host, port = bind_address(bind)
    server_class = ThreadingServer6 if ":" in host else ThreadingServer
    try:
        return make_server(host, port, application, server_class=server_class, handler_class=QuietHandler)
    except (OSError, UnicodeError) as exc:
        raise CommandError(f"cannot listen on {bind!r}: {exc}") from exc


class Command(BaseCommand):
    help = "Serve /metrics (Prometheus text) on a separate bind address, without a token."

    def add_arguments(self, parser):
        parser.add_argument(
            "--bind", default="127.0.0.1:9464", help="host:port or [v6 address]:port (default 127.0.0.1:9464)"
        )

    def handle(self, *args, bind: str, **options):
        server = metrics_server(bind)
        self.stdout.write(f"serving Prometheus metrics on http://{bind}/metrics")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
