from django.urls import path, re_path

from . import pages, views

urlpatterns = [
    re_path(r"^github/webhook/?$", views.webhook, name="github-webhook"),
    re_path(r"^github/callback/?$", views.callback, name="github-callback"),
    path("healthz", views.healthz, name="healthz"),
    path("relay/deliveries", pages.deliveries, name="relay-deliveries"),
    path("notifications", pages.notifications, name="relay-notifications"),
]
