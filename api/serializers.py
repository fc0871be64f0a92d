"""Input and output shapes of the API. Output serializers read; input serializers only validate —
the views hand validated data to services."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from relay.callbacks.triage_verdict import CATEGORIES, CONFIDENCES
from relay.inputs.params import aware_datetime, int_param
from relay.models import (
    VARIANT_KEYS,
    CIProvider,
    Delivery,
    Dispatch,
    DispatchAttempt,
    Event,
    FailedTest,
    HardwareKind,
    JobRun,
    Level,
    LevelChange,
    Project,
    UpstreamCommit,
)
from relay.registry.allowlist import oncall_list, oncall_problems, repo_name_problem


class LevelChangeOut(serializers.ModelSerializer):
    class Meta:
        model = LevelChange
        fields = ["from_level", "to_level", "changed_by", "reason", "changed_at"]


@extend_schema_field(
    {
        "oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}],
        "description": "GitHub handles: a list, or one comma-separated string (as the allowlist takes them)",
    }
)
class OncallsField(serializers.Field):
    def to_internal_value(self, data):
        problems = oncall_problems(data)
        if problems:
            raise serializers.ValidationError(problems)
        return oncall_list(data)

    def to_representation(self, value):
        return oncall_list(value)


class AsciiIntegerField(serializers.IntegerField):
    """A JSON integer, or its ASCII digits as a string (relay.inputs.params): DRF's own reads `"١٢٣"`
    as 123 and `123.0` as 123."""

    def to_internal_value(self, data):
        if (
            isinstance(data, bool)
            or not isinstance(data, int | str)
            or (isinstance(data, str) and int_param(data) is None)
        ):
            self.fail("invalid")
        return super().to_internal_value(data)


class AsciiDateTimeField(serializers.DateTimeField):
    """An ISO-8601 time with its time zone, in ASCII digits, within the calendar once in UTC
    (relay.inputs.params.aware_datetime): DRF's own reads `٢٠٢٦-…` as a date."""

    def to_internal_value(self, value):
        parsed = aware_datetime(value)
        if parsed is None:
            self.fail("invalid", format="an ISO-8601 time with a time zone, in ASCII digits")
        return parsed


class ProjectOut(serializers.ModelSerializer):
    oncalls = OncallsField(read_only=True)
    installed = serializers.SerializerMethodField(
        help_text="whether the GitHub App is installed on the repo; null when unknown"
    )

    class Meta:
        model = Project
        fields = [
            "full_name",
            "display_name",
            "github_repo_id",
            "level",
            "device",
            "oncalls",
            "events",
            "ci_provider",
            "hardware_kind",
            "variant_keys",
            "is_reference",
            "is_health_probe",
            "active",
            "installed",
            "rate_limit_per_min",
            "require_callback_token",
            "bisect_enabled",
            "bisect_daily_budget",
            "bisect_event_type",
            "mute_needs_issue",
            "created_at",
            "updated_at",
        ]

    def get_installed(self, project) -> bool | None:
        installed = self.context.get("installed")
        return None if installed is None else project.full_name.lower() in installed


class ProjectDetailOut(ProjectOut):
    level_history = LevelChangeOut(source="level_changes", many=True, read_only=True)

    class Meta(ProjectOut.Meta):
        fields = ProjectOut.Meta.fields + ["level_history"]


class BisectionSettingsIn(serializers.Serializer):
    """A backend's bisection settings (relay/bisect; docs/admins.md, "Bisection"): each optional."""

    bisect_enabled = serializers.BooleanField(
        required=False, help_text="bisect a new backend-only failure by dispatching the commits it spans"
    )
    bisect_daily_budget = AsciiIntegerField(
        required=False, min_value=0, max_value=1000, help_text="bisection probes per UTC day"
    )
    bisect_event_type = serializers.RegexField(
        r"^[A-Za-z0-9_.:-]{1,100}$",
        required=False,
        help_text="the repository_dispatch event type the backend's probe workflow listens for",
    )


class ProjectIn(BisectionSettingsIn):
    full_name = serializers.CharField(max_length=140)
    level = serializers.ChoiceField(choices=Level.choices)
    device = serializers.CharField(max_length=60, required=False, allow_blank=True, default="")
    oncalls = OncallsField(required=False, default=list)
    ci_provider = serializers.ChoiceField(choices=CIProvider.choices, required=False, default=CIProvider.GITHUB)
    hardware_kind = serializers.ChoiceField(choices=HardwareKind.choices, required=False, default=HardwareKind.OTHER)
    display_name = serializers.CharField(max_length=80, required=False, allow_blank=True, default="")
    github_repo_id = AsciiIntegerField(required=False, allow_null=True, min_value=1, default=None)
    reason = serializers.CharField(required=False, allow_blank=True, default="")

    def validate_full_name(self, value):
        problem = repo_name_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        if Project.objects.filter(full_name__iexact=value).exists():
            raise serializers.ValidationError("a project with this name is already registered")
        return value


class ProjectPatchIn(BisectionSettingsIn):
    display_name = serializers.CharField(max_length=80, required=False, allow_blank=True)
    oncalls = OncallsField(required=False)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=Event.choices),
        required=False,
        max_length=2,
        help_text="what the repo takes part in, as the allowlist's `events`; empty: both",
    )
    ci_provider = serializers.ChoiceField(choices=CIProvider.choices, required=False)
    hardware_kind = serializers.ChoiceField(choices=HardwareKind.choices, required=False)
    github_repo_id = AsciiIntegerField(required=False, allow_null=True, min_value=1)
    active = serializers.BooleanField(required=False)
    rate_limit_per_min = AsciiIntegerField(required=False, allow_null=True, min_value=1)
    require_callback_token = serializers.BooleanField(required=False, allow_null=True)
    variant_keys = serializers.ListField(
        child=serializers.ChoiceField(choices=VARIANT_KEYS),
        required=False,
        max_length=len(VARIANT_KEYS),
        help_text="which keys of its callbacks' environment make a hardware variant, in naming order; empty: one",
    )

    def validate_variant_keys(self, value):
        if len(set(value)) != len(value):
            raise serializers.ValidationError("a key may be listed once")
        return value

    def validate_events(self, value):
        if len(set(value)) != len(value):
            raise serializers.ValidationError("an event may be listed once")
        return value


class LevelIn(serializers.Serializer):
    level = serializers.ChoiceField(choices=Level.choices)
    device = serializers.CharField(max_length=60, required=False, allow_blank=True)
    reason = serializers.CharField(min_length=3, help_text="why the level changes; kept in the audit history")


class AllowlistIn(serializers.Serializer):
    yaml = serializers.CharField(help_text="the allowlist.yml text (upstream format)")
    reason = serializers.CharField(required=False, default="allowlist import via API")


class AllowlistResultOut(serializers.Serializer):
    created = serializers.ListField(child=serializers.CharField())
    updated = serializers.ListField(child=serializers.CharField())
    deactivated = serializers.ListField(child=serializers.CharField())
    unchanged = serializers.ListField(child=serializers.CharField())
    kept = serializers.ListField(child=serializers.CharField())


class AttemptOut(serializers.ModelSerializer):
    class Meta:
        model = DispatchAttempt
        fields = ["number", "started_at", "duration_ms", "status_code", "outcome", "error", "retry_at"]


class DispatchOut(serializers.ModelSerializer):
    repo = serializers.CharField(source="project.full_name")
    delivery_id = serializers.CharField(source="delivery.guid", help_text="X-GitHub-Delivery of the webhook")
    attempt_log = AttemptOut(many=True, read_only=True)

    class Meta:
        model = Dispatch
        fields = [
            "id",
            "delivery_id",
            "repo",
            "state",
            "event_type",
            "pr_number",
            "head_sha",
            "attempts",
            "next_attempt_at",
            "sent_at",
            "last_error",
            "created_at",
            "attempt_log",
        ]


class DeliveryOut(serializers.ModelSerializer):
    delivery_id = serializers.CharField(source="guid", help_text="X-GitHub-Delivery")

    class Meta:
        model = Delivery
        fields = [
            "delivery_id",
            "event",
            "action",
            "outcome",
            "reason",
            "repo_full_name",
            "pr_number",
            "head_sha",
            "ref",
            "label",
            "sender",
            "payload_bytes",
            "received_at",
        ]


class DeliveryDetailOut(DeliveryOut):
    dispatches = DispatchOut(many=True, read_only=True)

    class Meta(DeliveryOut.Meta):
        fields = DeliveryOut.Meta.fields + ["dispatches"]


class FailedTestOut(serializers.ModelSerializer):
    class Meta:
        model = FailedTest
        fields = ["name", "classname", "file", "outcome", "message", "stacktrace", "hw_classification", "truncated"]


class SuspectOut(serializers.Serializer):
    pr = serializers.IntegerField(allow_null=True)
    commit = serializers.CharField(allow_null=True)
    reason = serializers.CharField()


class EvidenceOut(serializers.Serializer):
    job = serializers.CharField()
    test = serializers.CharField()
    excerpt = serializers.CharField()
    log_url = serializers.CharField()


class TriageVerdictOut(serializers.Serializer):
    """The downstream's advisory verdict on the attempt, as relay.callbacks.triage_verdict kept it."""

    schema_version = serializers.IntegerField()
    category = serializers.ChoiceField(choices=CATEGORIES)
    confidence = serializers.ChoiceField(choices=CONFIDENCES)
    summary = serializers.CharField()
    suspected_upstream = SuspectOut(allow_null=True)
    evidence = EvidenceOut(many=True)
    reproduced_on_retry = serializers.BooleanField(allow_null=True)
    analyzer = serializers.DictField(child=serializers.CharField())
    analyzed_at = serializers.CharField(allow_null=True)


class JobRunOut(serializers.ModelSerializer):
    repo = serializers.CharField(source="project.full_name")
    level = serializers.CharField(source="project.level")
    delivery_id = serializers.CharField(source="delivery_key")
    triage_verdict = TriageVerdictOut(
        read_only=True,
        allow_null=True,
        help_text="advisory only: the downstream's triage verdict on this attempt (normalised), or null; never "
        "changes the conclusion",
    )

    class Meta:
        model = JobRun
        fields = [
            "id",
            "repo",
            "level",
            "delivery_id",
            "event_type",
            "head_sha",
            "pr_number",
            "workflow_name",
            "job_name",
            "run_id",
            "run_attempt",
            "status",
            "conclusion",
            "ended_by",
            "workflow_url",
            "artifact_url",
            "check_run_id",
            "job_id",
            "reported_started_at",
            "reported_completed_at",
            "in_progress_at",
            "completed_at",
            "start_unknown",
            "queue_seconds",
            "execution_seconds",
            "tests_passed",
            "tests_failed",
            "tests_skipped",
            "tests_error",
            "tests_xfailed",
            "tests_xpassed",
            "tests_total",
            "tests_accelerator_ran",
            "failed_tests_truncated",
            "tests_source",
            "environment",
            "triage_verdict",
            "created_at",
        ]


class JobRunDetailOut(JobRunOut):
    failed_tests = FailedTestOut(many=True, read_only=True)

    class Meta(JobRunOut.Meta):
        fields = JobRunOut.Meta.fields + ["failed_tests"]


class CommitOut(serializers.ModelSerializer):
    class Meta:
        model = UpstreamCommit
        fields = [
            "sha",
            "title",
            "author",
            "committed_at",
            "landed_at",
            "branch",
            "is_trunk",
            "pr_number",
            "parent_sha",
        ]
