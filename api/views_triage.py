"""/api/v1 for known issues, backends' expectations, subscriptions and their notifications.
Known issues and expectations: reads public, writes `write:projects` (turning an issue's gate
blocking off needs `admin`). Subscriptions and notifications: a signed-in user's (or a token's
user's) own; admins see all."""

from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, parsers, permissions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from relay.models import KnownIssue, Project, Subscription
from relay.notify import subscriptions as subscription_services
from relay.notify.selectors import subscription_notifications
from relay.triage import expectations as expectation_services
from relay.triage import issues as issue_services
from relay.triage.matching import PatternError

from . import serializers_triage as s
from .common import Cursor
from .models import Scope
from .parsers import JSONParser
from .permissions import _has_scope
from .views import _actor, _valid


class PlainTextParser(parsers.BaseParser):
    media_type = "text/plain"

    def parse(self, stream, media_type=None, parser_context=None):
        data = stream.read(expectation_services.MAX_BYTES + 1)
        if len(data) > expectation_services.MAX_BYTES:
            raise serializers.ValidationError(
                {"content": f"the file is larger than {expectation_services.MAX_BYTES // 1024} KiB"}
            )
        try:
            return {"content": data.decode("utf-8")}
        except UnicodeDecodeError as exc:
            raise serializers.ValidationError({"content": "the file is not UTF-8 text"}) from exc


def _issue_errors(fn):
    try:
        return fn()
    except (PatternError, issue_services.IssueError) as exc:
        raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from exc
    except issue_services.UnblockRefused as exc:
        raise permissions.exceptions.PermissionDenied(str(exc)) from exc


class KnownIssueViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Known failures with their tracker links. Matching failures show as *known* on every page.
    Filter with `?state=open|resolved`."""

    queryset = KnownIssue.objects.prefetch_related("projects").annotate(n=Count("occurrences")).order_by("-id")
    lookup_value_regex = r"[0-9]{1,18}"  # a crafted id is a 404 from the router, never a 500 from the database
    serializer_class = s.KnownIssueOut
    write_scope = Scope.WRITE_PROJECTS
    pagination_class = Cursor

    def get_queryset(self):
        state = self.request.query_params.get("state")
        return self.queryset.filter(state=state) if state in KnownIssue.State.values else self.queryset

    def _may_unblock(self) -> bool:
        """The API's admins: tokens with the admin scope (relay.triage.issues decides what needs one)."""
        return _has_scope(self.request, Scope.ADMIN)

    @extend_schema(request=s.KnownIssueIn, responses={201: s.KnownIssueOut})
    def create(self, request):
        data = _valid(s.KnownIssueIn, request.data)
        projects = data.pop("projects", [])
        data.pop("state", None)
        may_unblock = self._may_unblock()
        issue = _issue_errors(
            lambda: issue_services.known_issue_create(data, _actor(request), projects, may_unblock=may_unblock)
        )
        return Response(s.KnownIssueOut(issue).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.KnownIssuePatchIn, responses={200: s.KnownIssueOut})
    def partial_update(self, request, pk=None):
        issue = get_object_or_404(KnownIssue, pk=pk)
        data = _valid(s.KnownIssuePatchIn, request.data)
        projects = data.pop("projects", None)
        may_unblock = self._may_unblock()
        issue = _issue_errors(
            lambda: issue_services.known_issue_update(issue, data, projects=projects, may_unblock=may_unblock)
        )
        return Response(s.KnownIssueOut(issue).data)

    @extend_schema(responses={200: s.OccurrenceOut(many=True)})
    @action(detail=True, methods=["get"])
    def occurrences(self, request, pk=None):
        """Every failure that matched, newest first (cursor-paginated)."""
        issue = self.get_object()  # DRF answers 404 for a malformed id too
        page = self.paginate_queryset(issue.occurrences.select_related("project").order_by("-id"))
        return self.get_paginated_response(s.OccurrenceOut(page, many=True).data)


class ExpectationsView(APIView):
    """A backend's published expected failures and intermittent tests. GET lists them (`?as=text`
    for the upload format); PUT replaces the whole list from the file (`text/plain` body, or JSON
    `{"content": ...}`), all or nothing."""

    write_scope = Scope.WRITE_PROJECTS
    parser_classes = [PlainTextParser, JSONParser]

    def _project(self, full_name: str) -> Project:
        return get_object_or_404(Project, full_name__iexact=full_name)

    @extend_schema(
        parameters=[OpenApiParameter("as", str, enum=["text"], description="`text`: the upload format, as text/plain")],
        responses={200: s.ExpectationOut(many=True), (200, "text/plain"): OpenApiResponse(response=str)},
    )
    def get(self, request, full_name):
        project = self._project(full_name)
        if request.query_params.get("as") == "text":
            return HttpResponse(
                expectation_services.expectations_text(project), content_type="text/plain; charset=utf-8"
            )
        return Response(s.ExpectationOut(project.expectations.order_by("line", "id"), many=True).data)

    @extend_schema(
        request={"text/plain": str, "application/json": s.ExpectationsIn}, responses={200: s.ExpectationOut(many=True)}
    )
    def put(self, request, full_name):
        project = self._project(full_name)
        data = _valid(s.ExpectationsIn, request.data)
        try:
            rows = expectation_services.expectations_replace(project, data["content"], by=_actor(request))
        except expectation_services.ExpectationsError as exc:
            raise serializers.ValidationError({"content": [str(exc)]}) from exc
        return Response(s.ExpectationOut(rows, many=True).data)


class OwnSubscriptions(permissions.BasePermission):
    """Subscriptions hold webhook URLs and addresses: only their owner (or an admin) sees them."""

    message = "sign in, or send an API token, to manage your subscriptions"

    def has_permission(self, request, view):
        if not (request.user and request.user.is_authenticated):
            return False
        if request.method in permissions.SAFE_METHODS:
            return True
        return request.auth is None or _has_scope(request, Scope.WRITE_PROJECTS)


def _is_admin(request) -> bool:
    return _has_scope(request, Scope.ADMIN)


class SubscriptionViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    """Subscribe to a backend, a level, a known issue or a test pattern, for chosen events, by
    webhook (generic JSON or Slack-compatible) or email, each event or a daily digest."""

    serializer_class = s.SubscriptionOut
    permission_classes = [OwnSubscriptions]
    pagination_class = Cursor

    queryset = Subscription.objects.none()

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Subscription.objects.none()
        rows = Subscription.objects.select_related("project", "user").order_by("-id")
        return rows if _is_admin(self.request) else rows.filter(user=self.request.user)

    @extend_schema(request=s.SubscriptionIn, responses={201: s.SubscriptionOut})
    def create(self, request):
        data = _valid(s.SubscriptionIn, request.data)
        subscription = subscription_services.subscription_create(request.user, data)
        return Response(s.SubscriptionOut(subscription).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=s.SubscriptionPatchIn, responses={200: s.SubscriptionOut})
    def partial_update(self, request, pk=None):
        subscription = self.get_object()
        serializer = s.SubscriptionPatchIn(subscription, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        subscription = subscription_services.subscription_update(subscription, dict(serializer.validated_data))
        return Response(s.SubscriptionOut(subscription).data)

    @extend_schema(responses={200: s.NotificationOut(many=True)})
    @action(detail=True, methods=["get"])
    def notifications(self, request, pk=None):
        """What was sent to this subscription and what failed, with every attempt (newest first)."""
        subscription = self.get_object()
        rows = subscription_notifications(subscription)
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(s.NotificationOut(page, many=True).data)
