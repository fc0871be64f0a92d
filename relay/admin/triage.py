"""Admin for known issues, expectations, subscriptions, the notification log and mutes. Only
admins (superusers) may turn an issue's gate blocking off."""

from django import forms
from django.contrib import admin

from relay.models.notify import Notification, NotificationAttempt, NotificationEvent, Subscription
from relay.models.teststore import TestMute, TestMuteEvent
from relay.models.triage import Expectation, IssueOccurrence, KnownIssue
from relay.triage import issues as issue_services
from relay.triage import mutes as mute_services
from relay.triage.matching import PatternError, cause_check, message_check, patterns_check


class KnownIssueAdminForm(forms.ModelForm):
    url = forms.URLField(max_length=500, required=False, assume_scheme="https", label="Tracker issue URL")

    class Meta:
        model = KnownIssue
        fields = [
            "title",
            "url",
            "kind",
            "state",
            "all_backends",
            "projects",
            "test_patterns",
            "message_contains",
            "cause",
            "blocks_gate",
        ]

    def clean_test_patterns(self):
        return _checked(patterns_check, self.cleaned_data.get("test_patterns") or [])

    def clean_message_contains(self):
        return _checked(message_check, self.cleaned_data.get("message_contains", ""))

    def clean_cause(self):
        return _checked(cause_check, self.cleaned_data.get("cause", ""))

    def clean(self):
        data = super().clean()
        if not data.get("test_patterns") and not data.get("message_contains") and not data.get("cause"):
            raise forms.ValidationError("Give a test pattern, a message substring or a cause to match failures by.")
        return data


def _checked(check, value):
    try:
        return check(value)
    except PatternError as exc:
        raise forms.ValidationError(str(exc)) from exc


@admin.register(KnownIssue)
class KnownIssueAdmin(admin.ModelAdmin):
    form = KnownIssueAdminForm
    list_display = ("id", "title", "kind", "state", "all_backends", "blocks_gate", "created_by", "created_at")
    list_filter = ("state", "kind", "blocks_gate")
    search_fields = ("title", "url", "message_contains")
    filter_horizontal = ("projects",)
    readonly_fields = ("created_at", "resolved_at", "created_by")
    actions = ["resolve", "reopen"]

    def get_readonly_fields(self, request, obj=None):
        fields = super().get_readonly_fields(request, obj)
        return fields if request.user.is_superuser else (*fields, "blocks_gate")

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user.get_username()
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        issue_services.occurrences_backfill(form.instance.pk)

    @admin.action(description="Resolve the selected issues")
    def resolve(self, request, queryset):
        for issue in queryset:
            issue_services.known_issue_update(issue, {"state": KnownIssue.State.RESOLVED})

    @admin.action(description="Reopen the selected issues")
    def reopen(self, request, queryset):
        for issue in queryset:
            issue_services.known_issue_update(issue, {"state": KnownIssue.State.OPEN})


@admin.register(IssueOccurrence)
class IssueOccurrenceAdmin(admin.ModelAdmin):
    list_display = ("issue", "project", "head_sha", "test_id", "seen_at")
    list_filter = ("issue",)
    raw_id_fields = ("job_run",)

    def has_add_permission(self, request):
        return False


@admin.register(Expectation)
class ExpectationAdmin(admin.ModelAdmin):
    list_display = ("project", "pattern", "kind", "reason", "uploaded_at", "uploaded_by")
    list_filter = ("project", "kind")
    search_fields = ("pattern",)


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "project", "level", "channel", "digest", "origin", "active")
    list_filter = ("channel", "origin", "active", "digest")
    raw_id_fields = ("user", "issue")


class NotificationAttemptInline(admin.TabularInline):
    model = NotificationAttempt
    extra = 0
    can_delete = False
    readonly_fields = ("number", "started_at", "duration_ms", "status_code", "outcome", "error", "retry_at")


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("id", "subscription", "event", "digest_date", "state", "attempts", "sent_at")
    list_filter = ("state", "subscription")
    readonly_fields = [f.name for f in Notification._meta.fields]
    inlines = [NotificationAttemptInline]

    def has_add_permission(self, request):
        return False


@admin.register(NotificationEvent)
class NotificationEventAdmin(admin.ModelAdmin):
    list_display = ("occurred_at", "kind", "title", "project")
    list_filter = ("kind",)
    readonly_fields = [f.name for f in NotificationEvent._meta.fields]


# --- mutes (relay.triage.mutes): made, extended and lifted through the service, so each is audited ---


class TestMuteForm(forms.ModelForm):
    test_id = forms.CharField(max_length=2000, help_text="the device-agnostic test id the HUD shows")
    days = forms.IntegerField(min_value=1, max_value=mute_services.MAX_DAYS, initial=14, help_text="until it expires")
    # read by the service's one rule (relay.triage.mutes.tracking_issue_check), not a second one here
    tracking_issue = forms.CharField(
        max_length=mute_services.MAX_URL,
        required=False,
        help_text="the URL of the issue that tracks the fix; required where the backend says so (its Mutes setting)",
    )

    class Meta:
        model = TestMute
        fields = ["project", "reason", "owner", "tracking_issue"]

    def clean(self):
        data = super().clean()
        if data.get("project") and not self.errors:
            try:
                mute_services.mute_check(
                    data["project"],
                    data["test_id"],
                    data["reason"],
                    data["owner"],
                    data["days"],
                    tracking_issue=data.get("tracking_issue", ""),
                )
            except mute_services.MuteError as exc:
                raise forms.ValidationError(str(exc)) from exc
        return data


class TestMuteEventInline(admin.TabularInline):
    model = TestMuteEvent
    extra = 0
    can_delete = False
    readonly_fields = ("action", "by", "at", "expires_at", "note")

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(TestMute)
class TestMuteAdmin(admin.ModelAdmin):
    list_display = ("identity", "project", "owner", "expires_at", "lifted_at", "created_by")
    list_filter = ("project", "lifted_at")
    search_fields = ("identity__identity", "reason", "owner")
    inlines = [TestMuteEventInline]
    actions = ["extend_two_weeks", "lift"]

    def get_inlines(self, request, obj=None):
        return self.inlines if obj is not None else []

    def get_form(self, request, obj=None, **kwargs):
        if obj is None:
            kwargs["form"] = TestMuteForm
        return super().get_form(request, obj, **kwargs)

    def get_fields(self, request, obj=None):
        fields = ["project", "test_id", "reason", "owner", "tracking_issue", "days"]
        return fields if obj is None else super().get_fields(request, obj)

    def get_readonly_fields(self, request, obj=None):
        return () if obj is None else [f.name for f in TestMute._meta.fields]

    def save_model(self, request, obj, form, change):
        if change:
            return
        data = form.cleaned_data
        by = request.user.get_username()
        mute = mute_services.mute_create(
            data["project"],
            data["test_id"],
            data["reason"],
            data["owner"],
            by,
            data["days"],
            tracking_issue=data.get("tracking_issue", ""),
        )
        obj.__dict__.update(mute.__dict__)  # the admin's log and redirect name the mute the service made

    def save_related(self, request, form, formsets, change):
        pass  # the service wrote the mute and its audit row

    @admin.action(description="Extend the selected mutes by 14 days from now")
    def extend_two_weeks(self, request, queryset):
        done = self._each(request, queryset, lambda m: mute_services.mute_extend(m, request.user.get_username(), 14))
        self.message_user(request, f"{done} mutes extended.")

    @admin.action(description="Lift the selected mutes")
    def lift(self, request, queryset):
        done = self._each(request, queryset, lambda m: mute_services.mute_lift(m, request.user.get_username()))
        self.message_user(request, f"{done} mutes lifted.")

    def _each(self, request, queryset, change) -> int:
        done = 0
        for mute in queryset:
            try:
                change(mute)
                done += 1
            except mute_services.MuteError as exc:
                self.message_user(request, f"{mute}: {exc}", level="warning")
        return done
