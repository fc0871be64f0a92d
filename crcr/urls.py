from django.contrib import admin
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path


def favicon(request):
    """Pages link the SVG icon; this answers browsers (and the API docs) that ask for /favicon.ico."""
    return redirect(static("favicon.svg"))


# The relay's endpoints first: every webhook and callback resolves its URL, and a miss costs a
# regex per pattern tried before it.
urlpatterns = [
    path("", include("relay.urls")),
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("", include("api.urls")),
    path("", include("hud.urls")),
]
