"""The relay's machine endpoints (`/github/webhook`, `/github/callback`) through a lean Django
handler: the same views, with only the middleware a machine caller needs.

GitHub and downstream CI send JSON with a signature or a bearer token; nothing they send uses a
session, a CSRF cookie, a login, messages, static files or an ETag. The pages' middleware stack
(settings.MIDDLEWARE) cost more CPU than the whole callback view's checks (docs/performance.md,
"Where each millisecond goes"), so these URLs get MACHINE_MIDDLEWARE instead: security headers
(SecurityMiddleware's, and the Content-Security-Policy and X-Frame-Options every response of the
site carries, docs/security.md: the pages' policy, built once), the NUL-in-URL refusal,
CommonMiddleware (the Host check and the Content-Length, without which gunicorn sends an answer
chunked), the database-down 503 and the slow-body 408, in the pages' order and named here as
classes (not dotted names) so "find callers" leads here. Every other URL goes to the full
handler, unchanged.

`machine_or_pages` picks the handler by resolving the path against settings.MACHINE_URLCONF; the
lean handler resolves views there too but never installs it for `reverse()`, which keeps naming
every URL of the site."""

from csp.constants import HEADER as CSP_HEADER
from csp.utils import build_policy
from django.conf import settings
from django.core.handlers.exception import convert_exception_to_response
from django.core.handlers.wsgi import WSGIHandler
from django.middleware.common import CommonMiddleware
from django.middleware.security import SecurityMiddleware
from django.urls import Resolver404, get_resolver

from relay.middleware import DatabaseUnavailableMiddleware, NulInUrlMiddleware, SlowBodyMiddleware


class FixedSecurityHeadersMiddleware:
    """The Content-Security-Policy (settings.CONTENT_SECURITY_POLICY, as django-csp writes it
    for the pages) and X-Frame-Options (settings.X_FRAME_OPTIONS) on every machine answer. Built
    once: a machine answer needs no nonce, and csp's middleware would build the policy each time."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.headers = {CSP_HEADER: build_policy(), "X-Frame-Options": settings.X_FRAME_OPTIONS}

    def __call__(self, request):
        response = self.get_response(request)
        for name, value in self.headers.items():
            response.headers.setdefault(name, value)
        return response


MACHINE_MIDDLEWARE = (
    SecurityMiddleware,
    FixedSecurityHeadersMiddleware,
    NulInUrlMiddleware,
    CommonMiddleware,
    DatabaseUnavailableMiddleware,
    SlowBodyMiddleware,
)


class MachineHandler(WSGIHandler):
    """A WSGI handler whose middleware is `middleware`, outermost first (all synchronous)."""

    def __init__(self, middleware=MACHINE_MIDDLEWARE):
        self.middleware = middleware
        super().__init__()

    def load_middleware(self, is_async=False):
        # Django's own load_middleware reads settings.MIDDLEWARE only; this builds the same chain
        # (innermost last, exception-to-response around each) from the machine list.
        self._view_middleware, self._template_response_middleware, self._exception_middleware = [], [], []
        handler = convert_exception_to_response(self._get_response)
        for factory in reversed(self.middleware):
            middleware = factory(handler)
            if hasattr(middleware, "process_view"):
                self._view_middleware.insert(0, middleware.process_view)
            if hasattr(middleware, "process_exception"):
                self._exception_middleware.append(middleware.process_exception)
            handler = convert_exception_to_response(middleware)
        self._middleware_chain = handler

    def resolve_request(self, request):
        # machine_or_pages resolved this very path already (machine paths are ASCII, so
        # PATH_INFO and path_info are the same string); a caller that did not is resolved here.
        match = request.environ.pop(MATCH_KEY, None) or machine_resolver().resolve(request.path_info)
        request.resolver_match = match
        return match


MATCH_KEY = "crcr.machine_match"
"""Where machine_or_pages leaves the machine path's ResolverMatch for MachineHandler."""


def machine_resolver():
    return get_resolver(settings.MACHINE_URLCONF)


def machine_match(path: str):
    """The path's match among the machine endpoints, or None."""
    try:
        return machine_resolver().resolve(path)
    except Resolver404:
        return None


def machine_or_pages(pages, machine):
    """One WSGI application: machine endpoints to `machine`, everything else to `pages`."""

    def application(environ, start_response):
        match = machine_match(environ.get("PATH_INFO", ""))
        if match is None:
            return pages(environ, start_response)
        environ[MATCH_KEY] = match
        return machine(environ, start_response)

    return application
