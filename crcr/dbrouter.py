"""Reads of HUD pages and API reads on the replica (`DATABASE_REPLICA_URL`), everything else on
the primary.

Only a request the middleware marks reads from the replica: a GET or HEAD answered by a view of
`hud` or `api`. The relay (webhook, callbacks, its operator pages), the admin, Celery tasks,
management commands and threads never carry the mark, so they never see a lagging copy of what
they are about to change. Inside a marked request:

- writes go to the primary, and once the request has written (or opened a transaction on the
  primary) its later reads follow, so it reads what it wrote;
- sessions, users, permissions and API tokens are read on the primary: a replica a few seconds
  behind would sign a staff member out right after signing in, or accept an API token that was
  just revoked.

Without a replica both classes are left out of the settings; the router also answers None (the
default database) whenever the `replica` alias is missing."""

from contextvars import ContextVar

from django.db import connections

REPLICA = "replica"
PRIMARY = "default"
READ_APPS = ("hud.", "api.")
"""Modules whose views may read from the replica (by the view's module: no import of either)."""
SAFE_METHODS = frozenset({"GET", "HEAD"})
PRIMARY_APPS = frozenset({"auth", "sessions", "contenttypes", "admin"})
PRIMARY_MODELS = frozenset({("api", "apitoken")})
"""Credentials and who holds them: always read where they are revoked."""


class _ReadOnlyRequest:
    __slots__ = ("wrote",)

    def __init__(self):
        self.wrote = False


_request: ContextVar[_ReadOnlyRequest | None] = ContextVar("crcr_read_only_request", default=None)


def replica_configured() -> bool:
    return REPLICA in connections.settings


def _primary_only(model) -> bool:
    meta = model._meta
    return meta.app_label in PRIMARY_APPS or (meta.app_label, meta.model_name) in PRIMARY_MODELS


class ReplicaRouter:
    """Django database router: see the module docstring."""

    def db_for_read(self, model, **hints):
        marked = _request.get()
        if marked is None or marked.wrote or _primary_only(model) or not replica_configured():
            return None
        if connections[PRIMARY].in_atomic_block:
            return None  # a transaction on the primary reads its own rows
        return REPLICA

    def db_for_write(self, model, **hints):
        marked = _request.get()
        if marked is not None:
            marked.wrote = True
        return PRIMARY

    def allow_relation(self, obj1, obj2, **hints):
        # The replica holds the primary's rows: an object read there may point at one read here.
        if {obj1._state.db, obj2._state.db} <= {PRIMARY, REPLICA}:
            return True
        return None

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return db != REPLICA  # it follows the primary by replication, never by migrate


def read_only_view(request, view_func) -> bool:
    """A safe method answered by a HUD or API view."""
    return request.method in SAFE_METHODS and (view_func.__module__ or "").startswith(READ_APPS)


class ReadOnlyRequestMiddleware:
    """Marks a read-only request once its view is known (process_view), for the whole response,
    and clears the mark after it, whatever happened."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token = _request.set(None)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)

    def process_view(self, request, view_func, view_args, view_kwargs):
        if read_only_view(request, view_func):
            _request.set(_ReadOnlyRequest())
        return None
