"""Personal API tokens in admin: the raw token is shown once, in the answer to the form that
created it (never in a message, a cookie or the database). A token never carries more than its
owner may do, and only a superuser may create one for someone else."""

from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.utils import timezone

from relay.models import Project

from .models import ApiToken, BackendMaintainer, Scope, backend_scope, user_may


class ApiTokenForm(forms.ModelForm):
    scopes = forms.MultipleChoiceField(choices=Scope.choices, widget=forms.CheckboxSelectMultiple, initial=[Scope.READ])
    backends = forms.ModelMultipleChoiceField(
        queryset=Project.objects.filter(active=True).order_by("full_name"),
        required=False,
        help_text="Maintainer of these backends (scope backend:<owner>/<repo>): may mute their tests.",
    )

    class Meta:
        model = ApiToken
        fields = ["user", "name", "scopes"]

    def __init__(self, *args, issuer=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.issuer = issuer
        if issuer is not None and not issuer.is_superuser and "user" in self.fields:
            self.fields["user"].queryset = self.fields["user"].queryset.filter(pk=issuer.pk)
            self.fields["user"].initial = issuer.pk
        if issuer is not None and not issuer.is_superuser and "backends" in self.fields:
            self.fields["backends"].queryset = self.fields["backends"].queryset.filter(maintainers__user=issuer)

    def clean(self):
        cleaned = super().clean()
        backends = [backend_scope(p.full_name) for p in cleaned.get("backends") or []]
        cleaned["scopes"] = [*(cleaned.get("scopes") or []), *backends]
        owner, scopes = cleaned.get("user"), cleaned["scopes"]
        for person, role in ((owner, "its owner"), (self.issuer, "you")):
            beyond = [s for s in scopes if person is not None and not user_may(person, s)]
            if beyond:
                self.add_error("scopes", f"{', '.join(beyond)}: more than {role} ({person.get_username()}) may do.")
        return cleaned


@admin.register(BackendMaintainer)
class BackendMaintainerAdmin(admin.ModelAdmin):
    """Who maintains which backend (the `backend:<owner>/<repo>` scope): made by a superuser or
    whoever was given `api.add_backendmaintainer`, Django's own permission check on this form."""

    list_display = ("user", "project", "granted_by", "granted_at")
    list_filter = ("project",)
    readonly_fields = ("granted_by", "granted_at")

    def save_model(self, request, obj, form, change):
        if not change:
            obj.granted_by = request.user.get_username()
        super().save_model(request, obj, form, change)


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

    def get_queryset(self, request):
        tokens = super().get_queryset(request)
        return tokens if request.user.is_superuser else tokens.filter(user=request.user)

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)

        class IssuedBy(form):
            def __init__(self, *args, **inner):
                super().__init__(*args, issuer=request.user, **inner)

        return IssuedBy

    def get_fields(self, request, obj=None):
        return (
            ["user", "name", "scopes", "backends"]
            if obj is None
            else ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
        )

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj is None else ("user", "name", *self.readonly_fields)

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        token, raw = ApiToken.issue(form.cleaned_data["user"], form.cleaned_data["name"], form.cleaned_data["scopes"])
        obj.pk = token.pk
        request._issued_token = (token, raw)  # for response_add only; never a message or cookie

    def response_add(self, request, obj, post_url_continue=None):
        token, raw = request._issued_token
        response = TemplateResponse(
            request,
            "admin/api/apitoken/issued.html",
            {
                **self.admin_site.each_context(request),
                "token": token,
                "raw_token": raw,
                "title": "API token created",
                "opts": self.model._meta,
            },
        )
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{count} tokens revoked.", messages.SUCCESS)
