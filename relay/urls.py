from django.contrib.auth.views import LoginView
from django.urls import path

from . import machine_urls, pages, views

urlpatterns = [
    *machine_urls.urlpatterns,
    path("healthz", views.healthz, name="healthz"),
    path("relay/deliveries", pages.deliveries, name="relay-deliveries"),
    path("notifications", pages.notifications, name="relay-notifications"),
    # The sign-in pages that need one (notifications) send people to: it says why, unlike the admin's.
    path("accounts/login/", LoginView.as_view(template_name="relay/login.html"), name="login"),
]
