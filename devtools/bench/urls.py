"""The product's URLs, and the benchmark's empty view."""

from django.http import JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from crcr.urls import urlpatterns as product_urlpatterns

FLOOR_PATH = "bench/floor"


@csrf_exempt
def floor(request):
    """What a callback costs before the relay does anything: read the body, answer in JSON."""
    return JsonResponse({"ok": True, "status": "floor", "bytes": len(request.body)})


urlpatterns = [path(FLOOR_PATH, floor), *product_urlpatterns]
