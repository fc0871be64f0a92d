from django.http import JsonResponse


def webhook(request):
    return JsonResponse({"detail": "not yet"}, status=501)


def healthz(request):
    return JsonResponse({"ok": True})
