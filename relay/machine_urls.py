"""The URLs machines call: GitHub's webhook and downstream CI's callback. crcr.machine answers
them through the lean middleware stack; relay.urls includes them for `reverse()` and the test
client."""

from django.urls import re_path

from . import views

urlpatterns = [
    re_path(r"^github/webhook/?$", views.webhook, name="github-webhook"),
    re_path(r"^github/callback/?$", views.callback, name="github-callback"),
]
