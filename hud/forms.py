"""The known-issue form: what a maintainer fills in from a failure ("mark as known")."""

from django import forms

from relay.models import KnownIssue, Project
from relay.models.triage import MAX_CAUSE_CHARS, MAX_MESSAGE_CHARS, MAX_PATTERN_CHARS, MAX_PATTERNS
from relay.triage.matching import PatternError, cause_check, message_check, patterns_check


class KnownIssueForm(forms.Form):
    title = forms.CharField(max_length=200)
    url = forms.URLField(max_length=500, required=False, label="Tracker issue URL", assume_scheme="https")
    kind = forms.ChoiceField(choices=KnownIssue.Kind.choices)
    test_patterns = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        label="Test patterns",
        help_text=f"One glob per line over normalised test ids (module.Class.method or Class.method), at most {MAX_PATTERNS} of {MAX_PATTERN_CHARS} characters.",
    )
    message_contains = forms.CharField(max_length=MAX_MESSAGE_CHARS, required=False, label="Failure message contains")
    cause = forms.CharField(
        max_length=MAX_CAUSE_CHARS,
        required=False,
        label="Failure cause",
        help_text="A cause as its page names it (Type: normalised line): every failure with that reason.",
    )
    all_backends = forms.BooleanField(required=False, initial=True, label="All backends")
    projects = forms.ModelMultipleChoiceField(
        queryset=Project.objects.filter(active=True), required=False, label="Only these backends"
    )
    blocks_gate = forms.BooleanField(required=False, initial=True, label="Blocks crcr/gate (admins may turn this off)")

    def __init__(self, *args, may_unblock: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        if not may_unblock:
            self.fields["blocks_gate"].disabled = True

    def clean_test_patterns(self) -> list[str]:
        lines = [line for line in self.cleaned_data["test_patterns"].splitlines() if line.strip()]
        try:
            return patterns_check(lines)
        except PatternError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean_message_contains(self) -> str:
        try:
            return message_check(self.cleaned_data["message_contains"])
        except PatternError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean_cause(self) -> str:
        try:
            return cause_check(self.cleaned_data["cause"])
        except PatternError as exc:
            raise forms.ValidationError(str(exc)) from exc

    def clean(self):
        data = super().clean()
        if not data.get("test_patterns") and not data.get("message_contains") and not data.get("cause"):
            raise forms.ValidationError("Give a test pattern, a message substring or a cause to match failures by.")
        if not data.get("all_backends") and not data.get("projects"):
            raise forms.ValidationError("Choose the backends, or tick “All backends”.")
        return data
