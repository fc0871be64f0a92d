"""The /api/v1/ endpoints. Thin: validate, call one service or selector, shape the output."""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from relay.models import Delivery, Dispatch, JobRun, Project, UpstreamCommit
from relay.registry import service as registry
from relay.registry.allowlist import AllowlistError
from relay.results.heads import sha_resolve
from relay.selectors import installed_names

from . import serializers as s
from .common import Cursor
from .filters import CommitFilter, DeliveryFilter, DispatchFilter, JobRunFilter, ProjectFilter
from .models import Scope
from .permissions import OperatorRead


def _actor(request) -> str:
    token = getattr(request, "auth", None)
    name = getattr(token, "name", "")
    return f"{request.user.get_username()} (API token: {name})" if name else request.user.get_username()


class ProjectViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """The registry of downstream projects. Reads are public; writes need `write:projects`."""

    queryset = Project.objects.all().order_by("id")
    lookup_field = "full_name"
    lookup_value_regex = r"[^/]+/[^/]+"
    filterset_class = ProjectFilter
    write_scope = Scope.WRITE_PROJECTS
    pagination_class = Cursor

    def get_object(self):
        return get_object_or_404(Project, full_name__iexact=self.kwargs["full_name"])

    def get_serializer_class(self):
        return s.ProjectDetailOut if self.action == "retrieve" else s.ProjectOut

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "installed": installed_names()}

    @extend_schema(request=s.ProjectIn, responses={201: s.ProjectDetailOut})
    def create(self, request):
        data = _valid(s.ProjectIn, request.data)
        reason = data.pop("reason")
        project = registry.project_create(
            data.pop("full_name"), data.pop("level"), by=_actor(request), reason=reason, **data
        )
        return Response(
            s.ProjectDetailOut(project, context=self.get_serializer_context()).data, status=status.HTTP_201_CREATED
        )

    @extend_schema(request=s.ProjectPatchIn, responses={200: s.ProjectDetailOut})
    def partial_update(self, request, full_name=None):
        project = self.get_object()
        registry.project_update(project, _valid(s.ProjectPatchIn, request.data), by=_actor(request))
        return Response(s.ProjectDetailOut(project, context=self.get_serializer_context()).data)

    @extend_schema(request=s.LevelIn, responses={200: s.ProjectDetailOut})
    @action(detail=True, methods=["post"])
    def level(self, request, full_name=None):
        """Change the level (and device); the reason is kept in the audit history."""
        project = self.get_object()
        data = _valid(s.LevelIn, request.data)
        registry.project_set_level(
            project, data["level"], by=_actor(request), reason=data["reason"], device=data.get("device")
        )
        return Response(s.ProjectDetailOut(project, context=self.get_serializer_context()).data)

    @extend_schema(request=None, responses={200: s.ProjectDetailOut})
    @action(detail=True, methods=["post"])
    def deactivate(self, request, full_name=None):
        """Stop relaying to the project; its level and history stay."""
        project = self.get_object()
        registry.projects_deactivate([project])
        project.refresh_from_db()
        return Response(s.ProjectDetailOut(project, context=self.get_serializer_context()).data)


def _valid(serializer_class, data) -> dict:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


class AllowlistView(APIView):
    """The registry as upstream `allowlist.yml`: GET exports it, PUT replaces the registry's
    levels from it, all or nothing (scope `admin`)."""

    write_scope = Scope.ADMIN

    @extend_schema(responses={(200, "application/yaml"): OpenApiResponse(response=str, description="allowlist.yml")})
    def get(self, request):
        from django.http import HttpResponse

        return HttpResponse(registry.allowlist_export(), content_type="application/yaml; charset=utf-8")

    @extend_schema(request=s.AllowlistIn, responses={200: s.AllowlistResultOut})
    def put(self, request):
        data = _valid(s.AllowlistIn, request.data)
        try:
            result = registry.allowlist_import(data["yaml"], by=_actor(request), reason=data["reason"])
        except AllowlistError as exc:
            raise serializers.ValidationError({"yaml": exc.errors}) from exc
        return Response(s.AllowlistResultOut(result).data)


class DeliveryViewSet(viewsets.ReadOnlyModelViewSet):
    """Webhook deliveries, with their dispatches and every attempt on the detail."""

    queryset = Delivery.objects.defer("payload").order_by("-id")
    permission_classes = [OperatorRead]
    lookup_field = "guid"
    lookup_url_kwarg = "delivery_id"
    filterset_class = DeliveryFilter
    pagination_class = Cursor

    def get_queryset(self):
        if self.action == "retrieve":
            return Delivery.objects.defer("payload").prefetch_related("dispatches__project", "dispatches__attempt_log")
        return self.queryset

    def get_serializer_class(self):
        return s.DeliveryDetailOut if self.action == "retrieve" else s.DeliveryOut


class DispatchViewSet(viewsets.ReadOnlyModelViewSet):
    queryset = Dispatch.objects.select_related("project", "delivery").prefetch_related("attempt_log").order_by("-id")
    serializer_class = s.DispatchOut
    permission_classes = [OperatorRead]
    filterset_class = DispatchFilter
    pagination_class = Cursor
    lookup_value_regex = r"[0-9]{1,18}"  # `١٢` is no id: the router's 404, not the database's int()


class JobRunViewSet(viewsets.ReadOnlyModelViewSet):
    """Downstream job attempts as callbacks reported them (filter by commit, PR, backend, level,
    status, conclusion, event type, time range)."""

    queryset = JobRun.objects.select_related("project").order_by("-id")
    filterset_class = JobRunFilter
    pagination_class = Cursor
    lookup_value_regex = r"[0-9]{1,18}"  # `١٢` is no id: the router's 404, not the database's int()

    def get_queryset(self):
        return self.queryset.prefetch_related("failed_tests") if self.action == "retrieve" else self.queryset

    def get_serializer_class(self):
        return s.JobRunDetailOut if self.action == "retrieve" else s.JobRunOut

    @extend_schema(responses={200: s.FailedTestOut(many=True)})
    @action(detail=True, methods=["get"], url_path="failed-tests")
    def failed_tests(self, request, pk=None):
        job = self.get_object()
        return Response(s.FailedTestOut(job.failed_tests.all(), many=True).data)


class CommitViewSet(viewsets.ReadOnlyModelViewSet):
    """Upstream commits the relay has seen: trunk pushes and PR heads."""

    queryset = UpstreamCommit.objects.order_by("-landed_at", "-id")
    serializer_class = s.CommitOut
    lookup_field = "sha"
    lookup_value_regex = r"[0-9a-fA-F]{7,40}"
    filterset_class = CommitFilter

    class pagination_class(Cursor):
        ordering = ("-landed_at", "-id")

    def get_object(self):
        match = sha_resolve(self.kwargs["sha"])
        if match.commit is None:
            raise NotFound("SHA prefix is ambiguous" if match.ambiguous else "no commit with that SHA")
        return match.commit
