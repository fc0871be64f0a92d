from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.reverse import reverse
from rest_framework.routers import APIRootView, DefaultRouter

from . import views, views_bisections, views_enablement, views_hud, views_mutes, views_tests, views_triage


class ApiRoot(APIRootView):
    """CRCR HUD REST API, version 1: the registry, webhook deliveries and their dispatches,
    downstream jobs, upstream commits, the allowlist, level decisions, culprits, bisections, and per PR and
    per commit the answers the HUD gives ({number} and {sha} are to be filled in). Schema at
    /api/schema/, docs at /api/docs/."""

    TEMPLATED = {
        "prs": ("api-pr", {"number": 0}, "0", "{number}"),
        "pr-gate": ("api-pr-gate", {"number": 0}, "0", "{number}"),
        "baseline": ("api-commit-baseline", {"sha": "0" * 40}, "0" * 40, "{sha}"),
        "expectations": ("api-expectations", {"full_name": "owner/repo"}, "owner/repo", "{owner}/{repo}"),
        "test-history": ("api-test-history", {"identity": "IDENTITY"}, "IDENTITY", "{identity}"),
        "mute-extend": ("api-mute-extend", {"pk": 0}, "/0/", "/{id}/"),
        "mute-lift": ("api-mute-lift", {"pk": 0}, "/0/", "/{id}/"),
        "bisection": ("api-bisection", {"pk": 0}, "/0", "/{id}"),
        "enablement-backend": ("api-enablement-backend", {"full_name": "owner/repo"}, "owner/repo", "{owner}/{repo}"),
    }
    """Routes that need an argument: listed as URI templates (RFC 6570), as GitHub's API root does."""

    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        for key, (name, example, filled, template) in self.TEMPLATED.items():
            path, absolute = reverse(name, kwargs=example), reverse(name, kwargs=example, request=request)
            origin = absolute[: len(absolute) - len(path)]  # scheme and host, whose digits are never filled in
            response.data[key] = origin + path.replace(filled, template)
        return response


class Router(DefaultRouter):
    """DRF's router with its API root at /api/v1/, listing the allowlist beside the viewsets."""

    APIRootView = ApiRoot
    include_format_suffixes = False
    extra_root_entries = {
        "allowlist": "api-allowlist",
        "level-status": "api-level-status",
        "culprits": "api-culprits",
        "quality": "api-quality",
        "mutes": "api-mutes",
        "bisections": "api-bisections",
        "enablement": "api-enablement",
    }

    def get_api_root_view(self, api_urls=None):
        names = {prefix: self.routes[0].name.format(basename=basename) for prefix, _, basename in self.registry}
        return self.APIRootView.as_view(api_root_dict={**names, **self.extra_root_entries})


router = Router()
router.trailing_slash = "/?"  # scripts need not care about the final slash
router.register("projects", views.ProjectViewSet, basename="project")
router.register("deliveries", views.DeliveryViewSet, basename="delivery")
router.register("dispatches", views.DispatchViewSet, basename="dispatch")
router.register("jobs", views.JobRunViewSet, basename="jobrun")
router.register("commits", views.CommitViewSet, basename="commit")
router.register("known-issues", views_triage.KnownIssueViewSet, basename="knownissue")
router.register("subscriptions", views_triage.SubscriptionViewSet, basename="subscription")

urlpatterns = [
    path("api/v1/allowlist", views.AllowlistView.as_view(), name="api-allowlist"),
    re_path(
        r"^api/v1/commits/(?P<sha>[0-9a-fA-F]{7,40})/baseline/?$",
        views_hud.BaselineView.as_view(),
        name="api-commit-baseline",
    ),
    re_path(r"^api/v1/prs/(?P<number>[0-9]{1,9})/?$", views_hud.PullRequestView.as_view(), name="api-pr"),
    re_path(r"^api/v1/prs/(?P<number>[0-9]{1,9})/gate/?$", views_hud.GateView.as_view(), name="api-pr-gate"),
    re_path(
        r"^api/v1/projects/(?P<full_name>[^/]+/[^/]+)/expectations/?$",
        views_triage.ExpectationsView.as_view(),
        name="api-expectations",
    ),
    re_path(r"^api/v1/culprits/?$", views_hud.CulpritsView.as_view(), name="api-culprits"),
    re_path(r"^api/v1/level-status/?$", views_hud.LevelStatusView.as_view(), name="api-level-status"),
    re_path(r"^api/v1/quality/?$", views_tests.QualityView.as_view(), name="api-quality"),
    re_path(r"^api/v1/mutes/?$", views_mutes.MuteListView.as_view(), name="api-mutes"),
    re_path(r"^api/v1/enablement/?$", views_enablement.EnablementView.as_view(), name="api-enablement"),
    re_path(
        r"^api/v1/enablement/(?P<full_name>[^/]+/[^/]+)/?$",
        views_enablement.BackendEnablementView.as_view(),
        name="api-enablement-backend",
    ),
    re_path(r"^api/v1/bisections/?$", views_bisections.BisectionListView.as_view(), name="api-bisections"),
    re_path(
        r"^api/v1/bisections/(?P<pk>[0-9]{1,12})/?$",
        views_bisections.BisectionDetailView.as_view(),
        name="api-bisection",
    ),
    re_path(
        r"^api/v1/mutes/(?P<pk>[0-9]{1,12})/extend/?$", views_mutes.MuteChangeView.as_view(), name="api-mute-extend"
    ),
    re_path(
        r"^api/v1/mutes/(?P<pk>[0-9]{1,12})/lift/?$",
        views_mutes.MuteChangeView.as_view(action="lift"),
        name="api-mute-lift",
    ),
    re_path(
        r"^api/v1/tests/(?P<identity>.+)/history/?$", views_tests.TestHistoryView.as_view(), name="api-test-history"
    ),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's init script as a file: no inline script under the CSP.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
]
urlpatterns += [path("api/v1/", include(router.urls))]
