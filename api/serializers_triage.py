"""Shapes for known issues, expectations, subscriptions and notifications."""

from django.db.models import Q
from rest_framework import serializers

from relay.models import (
    Expectation,
    IssueOccurrence,
    KnownIssue,
    Level,
    Notification,
    NotificationAttempt,
    NotificationEvent,
    Project,
    Subscription,
)
from relay.models.triage import MAX_CAUSE_CHARS, MAX_MESSAGE_CHARS, MAX_PATTERN_CHARS, MAX_PATTERNS
from relay.triage.matching import PatternError, cause_check, message_check, pattern_check, patterns_check


def _checked(check, value):
    try:
        return check(value)
    except PatternError as exc:
        raise serializers.ValidationError(str(exc)) from exc


class KnownIssueOut(serializers.ModelSerializer):
    projects = serializers.SlugRelatedField(many=True, read_only=True, slug_field="full_name")
    occurrence_count = serializers.SerializerMethodField(help_text="how many failures matched it")

    class Meta:
        model = KnownIssue
        fields = [
            "id",
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
            "created_by",
            "created_at",
            "resolved_at",
            "occurrence_count",
        ]

    def get_occurrence_count(self, issue) -> int:
        annotated = getattr(issue, "n", None)
        return annotated if annotated is not None else issue.occurrences.count()


class KnownIssueIn(serializers.Serializer):
    title = serializers.CharField(max_length=200)
    url = serializers.URLField(max_length=500, required=False, allow_blank=True)
    kind = serializers.ChoiceField(choices=KnownIssue.Kind.choices, default=KnownIssue.Kind.PRODUCT)
    state = serializers.ChoiceField(choices=KnownIssue.State.choices, required=False)
    all_backends = serializers.BooleanField(default=True)
    projects = serializers.ListField(
        child=serializers.CharField(max_length=140),
        required=False,
        max_length=200,
        help_text="owner/repo of the backends, when not for all backends",
    )
    test_patterns = serializers.ListField(
        child=serializers.CharField(max_length=MAX_PATTERN_CHARS),
        required=False,
        max_length=MAX_PATTERNS,
        help_text="globs over normalised test ids: module.Class.method or Class.method",
    )
    message_contains = serializers.CharField(max_length=MAX_MESSAGE_CHARS, required=False, allow_blank=True)
    cause = serializers.CharField(
        max_length=MAX_CAUSE_CHARS,
        required=False,
        allow_blank=True,
        help_text="a failure cause as GET /api/v1/causes names it (`rule`): failures with that reason",
    )
    blocks_gate = serializers.BooleanField(required=False, help_text="false needs the admin scope")

    def validate_test_patterns(self, value):
        return _checked(patterns_check, value)

    def validate_message_contains(self, value):
        return _checked(message_check, value)

    def validate_cause(self, value):
        return _checked(cause_check, value)

    def validate_projects(self, names):
        query = Q()
        for name in names:
            query |= Q(full_name__iexact=name)
        found = {p.full_name.lower(): p for p in Project.objects.filter(query)} if names else {}
        missing = [n for n in names if n.lower() not in found]
        if missing:
            raise serializers.ValidationError(f"not registered: {', '.join(missing)}")
        return [found[n.lower()] for n in names]


class KnownIssuePatchIn(KnownIssueIn):
    title = serializers.CharField(max_length=200, required=False)
    kind = serializers.ChoiceField(choices=KnownIssue.Kind.choices, required=False)
    all_backends = serializers.BooleanField(required=False)


class OccurrenceOut(serializers.ModelSerializer):
    project = serializers.CharField(source="project.full_name")

    class Meta:
        model = IssueOccurrence
        fields = ["project", "head_sha", "test_id", "seen_at", "job_run"]


class ExpectationOut(serializers.ModelSerializer):
    class Meta:
        model = Expectation
        fields = ["pattern", "kind", "reason", "line", "uploaded_at", "uploaded_by"]


class ExpectationsIn(serializers.Serializer):
    content = serializers.CharField(
        allow_blank=True,
        max_length=256 * 1024,
        trim_whitespace=False,
        help_text="the whole file: one `pattern,Fail` or `pattern,Flake` per line, # comments",
    )


class SubscriptionOut(serializers.ModelSerializer):
    project = serializers.SlugRelatedField(read_only=True, slug_field="full_name")
    user = serializers.CharField(source="user.username", default=None, read_only=True)

    class Meta:
        model = Subscription
        fields = [
            "id",
            "name",
            "user",
            "project",
            "level",
            "issue",
            "test_pattern",
            "events",
            "channel",
            "target",
            "digest",
            "origin",
            "active",
            "created_at",
        ]


class SubscriptionIn(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    project = serializers.CharField(
        max_length=140, required=False, allow_blank=True, help_text="owner/repo of a backend"
    )
    level = serializers.ChoiceField(choices=Level.choices, required=False, allow_blank=True)
    issue = serializers.PrimaryKeyRelatedField(queryset=KnownIssue.objects.all(), required=False, allow_null=True)
    test_pattern = serializers.CharField(max_length=MAX_PATTERN_CHARS, required=False, allow_blank=True)
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=NotificationEvent.Kind.choices), required=False, max_length=10
    )
    channel = serializers.ChoiceField(choices=Subscription.Channel.choices)
    target = serializers.CharField(max_length=500, help_text="webhook URL (http or https) or email address")
    digest = serializers.BooleanField(default=False)
    active = serializers.BooleanField(default=True)

    def validate_project(self, value):
        if not value:
            return None
        project = Project.objects.filter(full_name__iexact=value).first()
        if project is None:
            raise serializers.ValidationError(f"not registered: {value}")
        return project

    def validate_test_pattern(self, value):
        return _checked(pattern_check, value) if value else ""

    def validate(self, data):
        from relay.notify.subscriptions import SubscriptionError, target_check

        if "channel" in data or "target" in data:
            try:
                data["target"] = target_check(
                    data.get("channel", getattr(self.instance, "channel", "")),
                    data.get("target", getattr(self.instance, "target", "")),
                )
            except SubscriptionError as exc:
                raise serializers.ValidationError({"target": str(exc)}) from exc
        return data


class SubscriptionPatchIn(SubscriptionIn):
    name = serializers.CharField(max_length=100, required=False)
    channel = serializers.ChoiceField(choices=Subscription.Channel.choices, required=False)
    target = serializers.CharField(max_length=500, required=False)
    digest = serializers.BooleanField(required=False)
    active = serializers.BooleanField(required=False)


class NotificationAttemptOut(serializers.ModelSerializer):
    class Meta:
        model = NotificationAttempt
        fields = ["number", "started_at", "duration_ms", "status_code", "outcome", "error", "retry_at"]


class NotificationOut(serializers.ModelSerializer):
    event_kind = serializers.CharField(source="event.kind", default=None)
    title = serializers.SerializerMethodField()
    attempt_log = NotificationAttemptOut(many=True, read_only=True)

    class Meta:
        model = Notification
        fields = [
            "id",
            "subscription",
            "event",
            "event_kind",
            "title",
            "digest_date",
            "state",
            "attempts",
            "sent_at",
            "last_error",
            "created_at",
            "attempt_log",
        ]

    def get_title(self, notification) -> str:
        return notification.event.title if notification.event_id else f"daily digest {notification.digest_date}"
