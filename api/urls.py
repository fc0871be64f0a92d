from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import SimpleRouter

from . import views, views_hud

router = SimpleRouter()
router.trailing_slash = "/?"  # scripts need not care about the final slash
router.register("projects", views.ProjectViewSet, basename="project")
router.register("deliveries", views.DeliveryViewSet, basename="delivery")
router.register("dispatches", views.DispatchViewSet, basename="dispatch")
router.register("jobs", views.JobRunViewSet, basename="jobrun")
router.register("commits", views.CommitViewSet, basename="commit")

urlpatterns = [
    path("api/v1/allowlist", views.AllowlistView.as_view(), name="api-allowlist"),
    re_path(r"^api/v1/commits/(?P<sha>[0-9a-fA-F]{7,40})/baseline/?$", views_hud.BaselineView.as_view(), name="api-commit-baseline"),
    re_path(r"^api/v1/prs/(?P<number>[0-9]{1,9})/?$", views_hud.PullRequestView.as_view(), name="api-pr"),
    re_path(r"^api/v1/prs/(?P<number>[0-9]{1,9})/gate/?$", views_hud.GateView.as_view(), name="api-pr-gate"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's init script as a file: no inline script under the CSP.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]
urlpatterns += [path("api/v1/", include(router.urls))]
