"""HUD pages. Grid, commit and PR pages live in hud.views_grid; summary, backend dashboard and
metrics in hud.views_summary."""

from django.urls import path, re_path

from . import (
    views_causes,
    views_enablement,
    views_grid,
    views_prometheus,
    views_search,
    views_summary,
    views_tests,
    views_triage,
)

urlpatterns = [
    path("", views_grid.grid, name="hud-grid"),
    re_path(r"^commit/(?P<sha>[0-9a-fA-F]{7,40})/?$", views_grid.commit, name="hud-commit"),
    re_path(r"^pr/(?P<number>[0-9]{1,9})/?$", views_grid.pull_request, name="hud-pr"),
    path("search", views_search.search_view, name="hud-search"),
    path("metrics", views_prometheus.prometheus_metrics, name="prometheus-metrics"),
    # any character: a name stored before relay.inputs.text.escaped was the rule may hold a newline
    re_path(r"^test/(?P<identity>(?s:.+))$", views_tests.test_view, name="hud-test"),
    path("crcr", views_summary.summary, name="hud-summary"),
    path("crcr/metrics", views_summary.metrics, name="hud-metrics"),
    path("crcr/health/<str:key>", views_summary.health_card, name="hud-health-card"),
    path("crcr/enablement", views_enablement.enablement, name="hud-enablement"),
    path(
        "crcr/enablement/<str:org>/<str:repo>", views_enablement.backend_enablement_page, name="hud-enablement-backend"
    ),
    path("crcr/<str:org>/<str:repo>", views_summary.backend, name="hud-backend"),
    path("causes", views_causes.causes, name="hud-causes"),
    path("causes/<int:pk>", views_causes.cause, name="hud-cause"),
    path("causes/<int:pk>/known-issue", views_causes.cause_known_issue, name="hud-cause-known-issue"),
    path("known-issues", views_triage.known_issues, name="hud-known-issues"),
    path("known-issues/new", views_triage.known_issue_new, name="hud-known-issue-new"),
    path("known-issues/suggested", views_triage.suggested, name="hud-suggested"),
    path("known-issues/<int:pk>", views_triage.known_issue, name="hud-known-issue"),
    path("known-issues/<int:pk>/state", views_triage.known_issue_state, name="hud-known-issue-state"),
]
