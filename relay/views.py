"""HTTP entry points of the relay. Thin: read the request, call one service, shape the answer."""

import logging
from functools import wraps

from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from relay.health.healthz import health_report
from relay.health.metrics import callback_answered
from relay.inputs.bodies import body_within

from .callbacks.receive import callback_receive
from .intake.deliveries import webhook_intake
from .intake.webhooks import MAX_BODY_BYTES, WebhookRejected, webhook_read

logger = logging.getLogger(__name__)


def post_only(view):
    """GitHub and CI clients read JSON; a wrong method answers 405 in JSON too."""

    def wrapped(request, *args, **kwargs):
        if request.method != "POST":
            response = JsonResponse({"detail": "Method not allowed"}, status=405)
            response["Allow"] = "POST"
            return response
        return view(request, *args, **kwargs)

    return wraps(view)(wrapped)


@csrf_exempt
@post_only
def webhook(request):
    body = body_within(request, MAX_BODY_BYTES)
    if body is None:
        return JsonResponse({"detail": "payload larger than GitHub's 25 MB limit"}, status=413)
    if not settings.GITHUB_WEBHOOK_SECRET:
        return JsonResponse({"detail": "webhook secret is not configured"}, status=503)
    try:
        hook = webhook_read(request.headers, body, settings.GITHUB_WEBHOOK_SECRET)
    except WebhookRejected as exc:
        logger.info("webhook refused (%s): %s", exc.status, exc.detail)
        return JsonResponse({"detail": exc.detail}, status=exc.status)
    result = webhook_intake(hook)
    return JsonResponse(result.body, status=result.status)


@csrf_exempt
@post_only
def callback(request):
    limit = settings.CRCR_CALLBACK_MAX_BYTES
    body = body_within(request, limit)
    if body is None:
        callback_answered(413)
        return JsonResponse({"detail": f"callback body larger than {limit // (1024 * 1024)} MB"}, status=413)
    result = callback_receive(request.META.get("HTTP_AUTHORIZATION"), body)  # not request.headers: it copies them all
    callback_answered(result.status, result.body.get("status", ""))
    if result.status >= 400:
        logger.info("callback refused (%s): %s", result.status, result.body.get("detail"))
    response = JsonResponse(result.body, status=result.status)
    for name, value in result.headers.items():
        response[name] = value
    return response


@require_GET
def healthz(request):
    report = health_report()
    return JsonResponse(report, status=503 if report["status"] == "down" else 200)
