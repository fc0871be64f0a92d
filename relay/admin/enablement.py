"""Admin for the module → integration path rules of the enablement view (relay.enablement.paths):
an admin's rules come before the shipped defaults (relay/enablement/paths.yml), so one overrides
them for the modules it matches."""

from django import forms
from django.contrib import admin

from relay.enablement.paths import rule_check
from relay.inputs.linear import PatternError
from relay.models import PathRule


class PathRuleForm(forms.ModelForm):
    class Meta:
        model = PathRule
        fields = ["position", "pattern", "path"]

    def clean_pattern(self):
        pattern = self.cleaned_data.get("pattern") or ""
        try:
            rule_check(pattern, "other")
        except PatternError as exc:
            raise forms.ValidationError(f"not a pattern RE2 runs: {exc}") from exc
        return pattern


@admin.register(PathRule)
class PathRuleAdmin(admin.ModelAdmin):
    form = PathRuleForm
    list_display = ("position", "pattern", "path")
    list_editable = ("pattern", "path")
    list_display_links = ("position",)
