"""Personal API tokens in admin: the raw token is shown once, on creation, and never stored."""

from django import forms
from django.contrib import admin, messages
from django.utils import timezone

from .models import ApiToken, Scope


class ApiTokenForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(choices=Scope.choices, widget=forms.CheckboxSelectMultiple, initial=[Scope.READ])

    class Meta:
        model = ApiToken
        fields = ["user", "name", "scopes"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    form = ApiTokenForm
    list_display = ("name", "user", "prefix", "scope_list", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    @admin.display(description="scopes")
    def scope_list(self, token):
        return ", ".join(token.scopes)

    def get_fields(self, request, obj=None):
        return ["user", "name", "scopes"] if obj is None else ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is None else ("user", "name", *self.readonly_fields)

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        token, raw = ApiToken.issue(form.cleaned_data["user"], form.cleaned_data["name"], form.cleaned_data["scopes"])
        obj.pk = token.pk
        messages.warning(request, f"Copy this token now; it will not be shown again: {raw}")

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{count} tokens revoked.", messages.SUCCESS)
