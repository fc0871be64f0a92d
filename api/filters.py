"""Query filters of the list endpoints (django-filter): each documented in the schema."""

from datetime import UTC

import django_filters
from django import forms
from django_filters.fields import IsoDateTimeField

from relay.inputs.params import int_param
from relay.models import Delivery, Dispatch, JobRun, Project, UpstreamCommit


class AsciiIntegerFormField(forms.IntegerField):
    """1–18 ASCII digits (relay.inputs.params): django-filter's NumberFilter reads `١٢` as 12."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        number = int_param(str(value))
        if number is None:
            raise forms.ValidationError("a number is 1 to 18 ASCII digits", code="invalid")
        return number


class NumberFilter(django_filters.NumberFilter):
    field_class = AsciiIntegerFormField


NOT_FILTERS = frozenset({"cursor", "page_size", "format"})
"""Query parameters of every list that are not filters (pagination, DRF's renderer choice)."""


class StrictFilterSet(django_filters.FilterSet):
    """A parameter that is no filter of this list is a 400 naming it: a misspelt or unsupported
    filter (`head_sha=` for `sha=`) silently ignored answers with the whole list."""

    def is_valid(self) -> bool:
        valid = super().is_valid()
        unknown = sorted(set(self.data) - set(self.filters) - NOT_FILTERS)
        if unknown:
            names, offered = ", ".join(unknown)[:200], ", ".join(sorted(self.filters))
            message = "unknown filter %(names)s; this list filters by %(offered)s"  # the names are the client's text
            self.form.add_error(None, forms.ValidationError(message, params={"names": names, "offered": offered}))
        return valid and not unknown


class ProjectFilter(StrictFilterSet):
    class Meta:
        model = Project
        fields = ["level", "device", "ci_provider", "hardware_kind", "active", "is_reference", "is_health_probe"]


class DeliveryFilter(StrictFilterSet):
    pr = NumberFilter(field_name="pr_number")
    sha = django_filters.CharFilter(field_name="head_sha")

    class Meta:
        model = Delivery
        fields = ["event", "action", "outcome"]


class DispatchFilter(StrictFilterSet):
    repo = django_filters.CharFilter(field_name="project__full_name", lookup_expr="iexact")
    delivery = django_filters.CharFilter(field_name="delivery__guid")
    pr = NumberFilter(field_name="pr_number")
    sha = django_filters.CharFilter(field_name="head_sha")

    class Meta:
        model = Dispatch
        fields = ["state", "event_type"]


class BoundedDateTimeField(IsoDateTimeField):
    """An ISO datetime the database can compare: years 1970–9998 once in UTC."""

    def clean(self, value):
        if isinstance(value, str) and not value.isascii():  # Django's parser reads `١` as a digit
            raise forms.ValidationError("a date is ISO 8601 in ASCII digits", code="invalid")
        moment = super().clean(value)
        if moment is None:
            return None
        try:
            utc = moment.astimezone(UTC)  # odd offsets (+19:26) never reach the database
        except OverflowError as exc:
            raise forms.ValidationError("date out of range (1970–9998)") from exc
        if not 1970 <= utc.year <= 9998:
            raise forms.ValidationError("date out of range (1970–9998)")
        return utc


class BoundedDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = BoundedDateTimeField


class JobRunFilter(StrictFilterSet):
    sha = django_filters.CharFilter(field_name="head_sha", help_text="upstream commit SHA (full)")
    pr = NumberFilter(field_name="pr_number")
    backend = django_filters.CharFilter(field_name="project__full_name", lookup_expr="iexact", help_text="owner/repo")
    level = django_filters.ChoiceFilter(field_name="project__level", choices=[(x, x) for x in ("L1", "L2", "L3", "L4")])
    since = BoundedDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = BoundedDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = JobRun
        fields = ["status", "conclusion", "event_type", "ended_by", "run_id"]


class CommitFilter(StrictFilterSet):
    pr = NumberFilter(field_name="pr_number")

    class Meta:
        model = UpstreamCommit
        fields = ["is_trunk", "branch"]
