from django.urls import path

from . import machine_urls, pages, views

urlpatterns = [
    *machine_urls.urlpatterns,
    path("healthz", views.healthz, name="healthz"),
    path("relay/deliveries", pages.deliveries, name="relay-deliveries"),
    path("notifications", pages.notifications, name="relay-notifications"),
]
