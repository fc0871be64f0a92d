"""Answer 503 with Retry-After, as JSON, when the database cannot be reached, instead of a 500
page: callers (GitHub, downstream CI) then know to retry."""

import logging

from django.db import InterfaceError, OperationalError
from django.http import JsonResponse

from relay.inputs.bodies import BodyTooSlow

logger = logging.getLogger(__name__)


class NulInUrlMiddleware:
    """400 for a URL carrying a NUL (%00) in its path or query: it names nothing, and PostgreSQL
    refuses it in any text it is compared with, so a search or filter would fail in the database
    (a 503 or a 500) instead of telling the caller."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        query = request.GET
        if "\x00" in request.path or any("\x00" in k or any("\x00" in v for v in query.getlist(k)) for k in query):
            return JsonResponse({"detail": "a URL may not contain a NUL character (%00)"}, status=400)
        return self.get_response(request)


class SlowBodyMiddleware:
    """408, as JSON, for a request whose body did not arrive in time (relay.inputs.bodies.BodyTooSlow)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, BodyTooSlow):
            logger.info("request body too slow: %s %s", request.method, request.path)
            return JsonResponse({"detail": str(exception)}, status=408)
        return None


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if isinstance(exception, (OperationalError, InterfaceError)):
            logger.warning("database unavailable: %s", exception)
            response = JsonResponse({"detail": "database unavailable, retry shortly"}, status=503)
            response["Retry-After"] = "5"
            return response
        return None
