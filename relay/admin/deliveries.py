"""Admin for webhook deliveries: read-only records, plus an action that re-dispatches a delivery
to chosen downstream repos through the normal durable path. The action needs its own permission
(`relay.redispatch_delivery`), not just the right to look, and only ever adds: existing dispatches
are reopened with their attempts and jobs kept, missing ones created."""

from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse

from relay.dispatch.fan_out import ResendRefused, dispatches_resend
from relay.models import Delivery, Dispatch, DispatchAttempt, Project


class ReadOnlyAdminMixin:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # history; retention (relay.ops.retention) is what trims it


class DispatchInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Dispatch
    fields = ("project", "state", "attempts", "next_attempt_at", "sent_at", "last_error")
    readonly_fields = fields
    extra = 0
    can_delete = False


class ResendForm(forms.Form):
    projects = forms.ModelMultipleChoiceField(
        queryset=Project.objects.filter(active=True).order_by("full_name"),
        widget=forms.CheckboxSelectMultiple,
        help_text="Each chosen repo gets a new dispatch of this delivery.",
    )


@admin.action(description="Re-dispatch to chosen repos…", permissions=["redispatch"])
def redispatch(modeladmin, request, queryset):
    relayable = queryset.filter(outcome=Delivery.Outcome.RELAYED)
    if not relayable.exists():
        modeladmin.message_user(
            request, "Only relayed deliveries (pull_request, push) can be re-dispatched.", messages.ERROR
        )
        return None
    form = ResendForm(request.POST if "apply" in request.POST else None)
    if form.is_valid():
        for delivery in relayable:
            try:
                count = dispatches_resend(delivery, form.cleaned_data["projects"], by=request.user.get_username())
            except ResendRefused as exc:
                modeladmin.message_user(request, str(exc), messages.ERROR)
                continue
            modeladmin.message_user(request, f"{delivery.guid}: {count} dispatches queued.", messages.SUCCESS)
        return None
    context = {
        **modeladmin.admin_site.each_context(request),
        "deliveries": relayable,
        "form": form,
        "title": "Re-dispatch deliveries",
        "opts": modeladmin.model._meta,
    }
    return TemplateResponse(request, "admin/relay/redispatch.html", context)


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("guid", "event", "action", "outcome", "pr_number", "head_sha", "received_at")
    list_filter = ("event", "action", "outcome")
    search_fields = ("guid", "head_sha", "=pr_number")
    readonly_fields = [f.name for f in Delivery._meta.fields]
    inlines = [DispatchInline]
    actions = [redispatch]
    date_hierarchy = "received_at"

    def has_redispatch_permission(self, request):
        return request.user.has_perm("relay.redispatch_delivery")


@admin.register(DispatchAttempt)
class DispatchAttemptAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("dispatch", "number", "outcome", "status_code", "duration_ms", "started_at", "retry_at")
    list_filter = ("outcome",)
    readonly_fields = [f.name for f in DispatchAttempt._meta.fields]
