"""GET /metrics: the Prometheus exposition (relay/health/exposition.py), behind a bearer token. Without
CRCR_METRICS_TOKEN the main server does not serve it (404), so a deployment exposes nothing by
accident; `manage.py metrics_serve` serves the same text on a separate bind address instead
(docs/admins.md, "Alerts and metrics")."""

import hmac
import logging

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from relay.health.exposition import CONTENT_TYPE, exposition

logger = logging.getLogger(__name__)


def token_ok(authorization: str, token: str) -> bool:
    scheme, _, given = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode())


@require_GET
def prometheus_metrics(request):
    token = settings.CRCR_METRICS_TOKEN
    if not token:
        return JsonResponse({"detail": "metrics are not served here (set CRCR_METRICS_TOKEN)"}, status=404)
    if not token_ok(request.META.get("HTTP_AUTHORIZATION", ""), token):
        response = JsonResponse({"detail": "a valid bearer token is required"}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    try:
        text = exposition(settings.CRCR_METRICS_CACHE_SECONDS)
    except DatabaseError as exc:
        logger.warning("metrics unavailable: %s: %s", exc.__class__.__name__, exc)
        return JsonResponse({"detail": "database unavailable"}, status=503)
    response = HttpResponse(text, content_type=CONTENT_TYPE)
    response["Cache-Control"] = "no-store"
    return response
