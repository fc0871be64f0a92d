"""Admin for the registry. Level changes go through relay.registry.service so each one is audited with the
admin's username and a reason; the audit history itself is read-only."""

from django import forms
from django.contrib import admin, messages

from relay.models import (
    Bisection,
    BisectProbe,
    DemotionDecision,
    DemotionPullRequest,
    Event,
    Installation,
    InstalledRepo,
    Level,
    LevelChange,
    Project,
)
from relay.registry.allowlist import handle_problem, oncall_list, repo_name_problem
from relay.registry.service import project_register, project_set_level, projects_deactivate


class ReadOnlyMixin:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ProjectAdminForm(forms.ModelForm):
    oncalls = forms.CharField(required=False, help_text="GitHub handles pinged on failures, comma-separated")
    events = forms.MultipleChoiceField(
        choices=Event.choices,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="What it takes part in (the allowlist's events). None ticked: both, the allowlist default.",
    )
    level_change_reason = forms.CharField(
        label="Reason for level change",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Required when the level changes; kept in the project's audit history.",
    )

    class Meta:
        model = Project
        fields = "__all__"  # noqa: DJ007 - the admin edits every field of a project

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.initial["oncalls"] = ", ".join(oncall_list(self.instance.oncalls))
        if "level_pass_rate" in self.fields:  # a form (or script) that leaves it out keeps the entry's basis
            self.fields["level_pass_rate"].required = False

    def clean_level_pass_rate(self):
        return self.cleaned_data.get("level_pass_rate") or self.instance.level_pass_rate

    def clean_full_name(self):
        full_name = self.cleaned_data["full_name"].strip().strip("/")
        if problem := repo_name_problem(full_name):
            raise forms.ValidationError(problem)
        return full_name

    def clean_oncalls(self):
        handles = oncall_list(self.cleaned_data["oncalls"])
        problems = [p for p in map(handle_problem, handles) if p]
        if problems:
            raise forms.ValidationError(problems)
        return handles

    def clean_events(self):
        chosen = self.cleaned_data["events"]
        return [value for value in self.instance.events or () if value in chosen] + [
            value for value in Event.values if value in chosen and value not in (self.instance.events or ())
        ]

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("level") == Level.L3 and not cleaned.get("device"):
            self.add_error("device", "An L3 project needs a device: its label is ciflow/crcr/<device>.")
        if self.instance.pk and "level" in self.changed_data and not cleaned.get("level_change_reason", "").strip():
            self.add_error("level_change_reason", "Say why the level changes: the reason goes in the audit history.")
        return cleaned


class LevelChangeInline(ReadOnlyMixin, admin.TabularInline):
    model = LevelChange
    verbose_name = "level change"
    verbose_name_plural = "level history"
    fields = readonly_fields = ("changed_at", "changed_by", "from_level", "to_level", "reason")
    extra = 0
    can_delete = False


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    form = ProjectAdminForm
    list_display = (
        "full_name",
        "level",
        "device",
        "hardware_kind",
        "ci_provider",
        "is_reference",
        "is_health_probe",
        "active",
    )
    list_filter = ("level", "active", "hardware_kind", "ci_provider", "is_reference", "is_health_probe")
    search_fields = ("full_name", "display_name", "device")
    readonly_fields = ("created_at", "updated_at")
    actions = ["deactivate_selected"]
    fieldsets = (
        (None, {"fields": ("full_name", "display_name", "github_repo_id", "active")}),
        ("Level", {"fields": ("level", "device", "level_change_reason", "oncalls", "events", "position")}),
        ("Level criteria", {"fields": ("level_pass_rate", "excuse_triage_verdicts")}),
        ("Bisection", {"fields": ("bisect_enabled", "bisect_daily_budget", "bisect_event_type")}),
        ("Mutes", {"fields": ("mute_needs_issue",)}),
        (
            "Kind",
            {
                "fields": (
                    "hardware_kind",
                    "device_type",
                    "variant_keys",
                    "ci_provider",
                    "is_reference",
                    "reference_reports",
                    "is_health_probe",
                )
            },
        ),
        ("Timestamps", {"fields": ("created_at", "updated_at")}),
    )

    def get_fieldsets(self, request, obj=None):
        # Fields added to Project later land in their own section instead of vanishing from the form.
        listed = {name for _, options in self.fieldsets for name in options["fields"]}
        rest = [
            f.name
            for f in Project._meta.get_fields()
            if getattr(f, "editable", False) and f.concrete and not f.primary_key
        ]
        rest = [name for name in rest if name not in listed]
        return [*self.fieldsets[:-1], ("Callbacks and identity", {"fields": rest}), self.fieldsets[-1]]

    def get_inlines(self, request, obj):
        return [LevelChangeInline] if obj else []

    def save_model(self, request, obj, form, change):
        reason = form.cleaned_data.get("level_change_reason", "").strip()
        if not change:
            project_register(obj, by=request.user.get_username(), reason=reason)
            return
        # Level and device are written by project_set_level, which audits the change.
        obj.save(update_fields=_fields_except("level", "device", "created_at"))
        project_set_level(
            obj,
            form.cleaned_data["level"],
            by=request.user.get_username(),
            reason=reason,
            device=form.cleaned_data["device"],
        )

    @admin.action(description="Deactivate selected projects", permissions=["change"])
    def deactivate_selected(self, request, queryset):
        count = projects_deactivate(queryset)
        self.message_user(request, f"Deactivated {count} project{'s' if count != 1 else ''}.", messages.SUCCESS)


def _fields_except(*names: str) -> list[str]:
    return [f.name for f in Project._meta.concrete_fields if not f.primary_key and f.name not in names]


@admin.register(LevelChange)
class LevelChangeAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("project", "from_level", "to_level", "changed_by", "changed_at", "reason")
    list_filter = ("to_level", "from_level")
    search_fields = ("project__full_name", "changed_by", "reason")
    date_hierarchy = "changed_at"


@admin.register(DemotionPullRequest)
class DemotionPullRequestAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """The demotion loop's pull requests (relay.levels.demotion): what the relay wants of each."""

    list_display = ("project", "from_level", "to_level", "number", "state", "created_at", "synced_at", "closed_at")
    list_filter = ("state",)
    search_fields = ("project__full_name", "branch")


@admin.register(DemotionDecision)
class DemotionDecisionAdmin(ReadOnlyMixin, admin.ModelAdmin):
    """The demotion loop's audit: every decision, who took it and the evidence it rested on."""

    list_display = ("project", "kind", "decided_by", "demotion_pr", "upstream_pr", "decided_at", "note")
    list_filter = ("kind",)
    search_fields = ("project__full_name", "decided_by", "note")
    date_hierarchy = "decided_at"


class InstalledRepoInline(ReadOnlyMixin, admin.TabularInline):
    model = InstalledRepo
    fields = readonly_fields = ("full_name", "repo_id", "updated_at")
    extra = 0


@admin.register(Installation)
class InstallationAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("installation_id", "account_login", "repository_selection", "suspended", "updated_at")
    list_filter = ("suspended", "repository_selection")
    search_fields = ("account_login",)
    inlines = [InstalledRepoInline]


@admin.register(InstalledRepo)
class InstalledRepoAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("full_name", "repo_id", "installation", "updated_at")
    search_fields = ("full_name",)


class BisectProbeInline(admin.TabularInline):
    model = BisectProbe
    fields = readonly_fields = ("number", "role", "sha", "index", "outcome", "dispatch", "created_at", "decided_at")
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Bisection)
class BisectionAdmin(admin.ModelAdmin):
    """Read-only: relay/bisect moves a bisection; an operator reads what it did."""

    list_display = ("id", "project", "state", "culprit_sha", "good_sha", "bad_sha", "created_at", "finished_at")
    list_filter = ("state",)
    search_fields = ("project__full_name", "culprit_sha", "bad_sha")
    readonly_fields = [f.name for f in Bisection._meta.fields]
    inlines = [BisectProbeInline]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
