"""/crcr/enablement: how far each backend has come through PyTorch's suite, per integration
path, the reference's row first; /crcr/enablement/<org>/<repo>: one backend's modules (`?path=`
narrows them to one path, `?variant=` to one hardware variant's jobs), its newly skipped modules
and its un-skip candidates."""

from django.db import DatabaseError
from django.views.decorators.http import require_GET

from hud.rendering import page, unavailable
from hud.selectors_backend import backend_find
from hud.selectors_enablement import PATHS, TREND_DAYS, backend_modules, enablement_page, path_known


@require_GET
def enablement(request):
    context = {"nav": "summary", "trend_days": TREND_DAYS}
    try:
        context["table"] = enablement_page()
    except DatabaseError as exc:
        return unavailable(request, "hud/enablement.html", context, exc, partial="body")
    return page(request, "hud/enablement.html", context, partial="body")


@require_GET
def backend_enablement_page(request, org: str, repo: str):
    path = request.GET.get("path", "")[:40]
    variant = request.GET.get("variant")  # None: every variant; "" names the unnamed one
    context = {"nav": "summary", "full_name": f"{org}/{repo}", "path": path, "paths": PATHS, "variant": variant}
    if path and not path_known(path):
        context["path_error"] = f"No integration path is called {path!r}; showing every module."
        context["path"] = path = ""
    try:
        project = backend_find(org, repo)
        if project is None:
            return page(request, "hud/backend_404.html", context, status=404, partial=None)
        context["view"] = backend_modules(project, path, variant=variant[:200] if variant is not None else None)
    except DatabaseError as exc:
        return unavailable(request, "hud/enablement_backend.html", context, exc, partial="body")
    return page(request, "hud/enablement_backend.html", context, partial="body")
