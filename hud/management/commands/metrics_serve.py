"""`manage.py metrics_serve --bind 127.0.0.1:9464`: the /metrics text on a bind address of its own,
with no token, for a deployment that keeps Prometheus on a private network instead of giving it a
bearer token (docs/admins.md, "Alerts and metrics"). Run it with the web tier's
PROMETHEUS_MULTIPROC_DIR to include the web processes' callback counters."""

from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connections

from relay.levels.metrics import CONTENT_TYPE, exposition


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
    def log_message(self, *args):
        pass


class Command(BaseCommand):
    help = "Serve /metrics (Prometheus text) on a separate bind address, without a token."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1:9464", help="host:port (default 127.0.0.1:9464)")

    def handle(self, *args, bind: str, **options):
        host, _, port = bind.rpartition(":")
        if not host or not port.isdigit():
            raise CommandError(f"--bind wants host:port, got {bind!r}")
        server = make_server(host, int(port), application, server_class=WSGIServer, handler_class=QuietHandler)
        server.timeout = 30
        self.stdout.write(f"serving Prometheus metrics on http://{bind}/metrics")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
