"""The product's URLs, the benchmark's empty view and, with CRCR_BENCH_STAGES=1, the per-stage
timings of callbacks (devtools/bench/stages.py)."""

import os

from django.http import JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from crcr.urls import urlpatterns as product_urlpatterns

from . import stages

STAGES_ON = os.environ.get("CRCR_BENCH_STAGES") == "1"

FLOOR_PATH = "bench/floor"
STAGES_PATH = "bench/stages"


@csrf_exempt
def floor(request):
    """What a callback costs before the relay does anything: read the body, answer in JSON."""
    return JsonResponse({"ok": True, "status": "floor", "bytes": len(request.body)})


def stages_take(request):
    """This process's stage totals per callback since the last call, then reset."""
    return JsonResponse(stages.report_take())


urlpatterns = [path(FLOOR_PATH, floor), *product_urlpatterns]
if STAGES_ON:
    urlpatterns.insert(0, path(STAGES_PATH, stages_take))
