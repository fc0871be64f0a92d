"""Admin for failure causes: each backend's opt-in to issues for its causes (and its thresholds),
and the issues filed, read-only (the relay keeps them in step with GitHub)."""

from django.contrib import admin

from relay.models import CauseIssue, CauseIssuePolicy


@admin.register(CauseIssuePolicy)
class CauseIssuePolicyAdmin(admin.ModelAdmin):
    list_display = ("project", "enabled", "open_trunk_commits", "open_tests", "window_days", "close_after_days")
    list_filter = ("enabled",)
    autocomplete_fields = ("project",)


@admin.register(CauseIssue)
class CauseIssueAdmin(admin.ModelAdmin):
    list_display = ("project", "label", "state", "number", "tests", "trunk_commits", "opened_at", "closed_at")
    list_filter = ("state",)
    readonly_fields = [f.name for f in CauseIssue._meta.fields]

    def has_add_permission(self, request):
        return False
