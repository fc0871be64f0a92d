from django.conf import settings


def sandbox(request):
    return {"SANDBOX": settings.CRCR_SANDBOX, "UPSTREAM_REPO": settings.CRCR_UPSTREAM_REPO}
