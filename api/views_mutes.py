"""Mutes (quarantine) over the API: list (public), create, extend and lift. A write needs an API
token with the backend's own scope (`backend:<owner>/<repo>`, api/models.py) or `admin`, or a
superuser's session; a backend's token mutes only for that backend. Every write is audited
(relay.triage.mutes)."""

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, permissions, serializers
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from relay.models import Project, TestMute
from relay.results.tests import mute_found, mutes_listed
from relay.selectors import active_project
from relay.triage import mutes as mute_services

from .common import Cursor
from .models import ApiToken, Scope, backend_scope
from .serializers import AsciiDateTimeField, AsciiIntegerField
from .views import _actor, _valid


class MuteIn(serializers.Serializer):
    backend = serializers.CharField(max_length=200, help_text="owner/repo of the backend that mutes")
    test_id = serializers.CharField(max_length=2000, help_text="the device-agnostic id the HUD shows")
    reason = serializers.CharField(max_length=500)
    owner = serializers.CharField(max_length=200, help_text="who answers for it")
    tracking_issue = serializers.CharField(
        max_length=mute_services.MAX_URL,
        required=False,
        allow_blank=True,
        default="",
        help_text="the URL of the issue that tracks the fix; required where the backend says so (mute_needs_issue)",
    )
    days = AsciiIntegerField(required=False, min_value=1, max_value=mute_services.MAX_DAYS)
    expires_at = AsciiDateTimeField(required=False)


class MuteChangeIn(serializers.Serializer):
    days = AsciiIntegerField(required=False, min_value=1, max_value=mute_services.MAX_DAYS)
    expires_at = AsciiDateTimeField(required=False)
    note = serializers.CharField(max_length=500, required=False, allow_blank=True, default="")


class MuteEventOut(serializers.Serializer):
    action = serializers.CharField()
    by = serializers.CharField()
    at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField(allow_null=True)
    note = serializers.CharField()


class MuteOut(serializers.ModelSerializer):
    backend = serializers.CharField(source="project.full_name")
    test_id = serializers.CharField(source="identity.identity")
    active = serializers.SerializerMethodField()
    events = MuteEventOut(many=True)

    class Meta:
        model = TestMute
        fields = [
            "id",
            "backend",
            "test_id",
            "reason",
            "owner",
            "tracking_issue",
            "created_by",
            "created_at",
            "expires_at",
            "lifted_at",
            "lifted_by",
            "active",
            "events",
        ]

    def get_active(self, mute) -> bool:
        return mute.active_at(timezone.now())


def may_mute(request, project: Project) -> bool:
    """A token with this backend's scope (or admin), or a superuser's session."""
    if isinstance(request.auth, ApiToken):
        return request.auth.allows(backend_scope(project.full_name)) or request.auth.allows(Scope.ADMIN)
    user = request.user
    return bool(user and user.is_authenticated and user.is_superuser)


class SignedInWrite(permissions.BasePermission):
    message = "muting needs an API token with the backend's scope (backend:<owner>/<repo>) or admin"

    def has_permission(self, request, view):
        return request.method in permissions.SAFE_METHODS or bool(request.user and request.user.is_authenticated)


def _checked(request, project: Project) -> None:
    if not may_mute(request, project):
        raise PermissionDenied(
            f"only {project.full_name}'s maintainers (scope {backend_scope(project.full_name)}) or an admin may change its mutes"
        )


def _answer(call):
    try:
        return call()
    except mute_services.MuteError as exc:
        raise serializers.ValidationError({"detail": str(exc)}) from exc


class MuteListView(generics.ListAPIView):
    """GET: mutes, newest first (`backend`, `test_id`, `active=true|false` filter them). POST:
    mute a test for a backend (reason, owner, `days` — 14 by default — or `expires_at`, and
    `tracking_issue`, which a backend with `mute_needs_issue` requires: 400 without it)."""

    permission_classes = [SignedInWrite]
    serializer_class = MuteOut
    pagination_class = Cursor

    @extend_schema(
        parameters=[
            OpenApiParameter("backend", OpenApiTypes.STR),
            OpenApiParameter("test_id", OpenApiTypes.STR),
            OpenApiParameter("active", OpenApiTypes.BOOL),
        ]
    )
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    def get_queryset(self):
        params = self.request.query_params
        active = {"true": True, "false": False}.get(params.get("active", ""))
        return mutes_listed(params.get("backend", "").strip(), params.get("test_id", "").strip(), active)

    @extend_schema(request=MuteIn, responses={201: MuteOut})
    def post(self, request):
        data = _valid(MuteIn, request.data)
        project = active_project(data["backend"].strip())
        if project is None:
            raise NotFound(f"no registered backend {data['backend'][:200]!r}")
        _checked(request, project)
        mute = _answer(
            lambda: mute_services.mute_create(
                project,
                data["test_id"],
                data["reason"],
                data["owner"],
                _actor(request),
                days=data.get("days"),
                expires_at=data.get("expires_at"),
                tracking_issue=data["tracking_issue"],
            )
        )
        return Response(MuteOut(mute_found(mute.pk)).data, status=201)


class MuteChangeView(APIView):
    """POST /api/v1/mutes/<id>/extend (`days` or `expires_at`, `note`) or …/lift (`note`)."""

    permission_classes = [SignedInWrite]
    action = "extend"

    @extend_schema(request=MuteChangeIn, responses={200: MuteOut})
    def post(self, request, pk):
        mute = mute_found(int(pk))
        if mute is None:
            raise NotFound(f"no mute {pk}")
        _checked(request, mute.project)
        data = _valid(MuteChangeIn, request.data)
        if self.action == "lift":
            mute = _answer(lambda: mute_services.mute_lift(mute, _actor(request), data["note"]))
        else:
            mute = _answer(
                lambda: mute_services.mute_extend(
                    mute, _actor(request), data.get("days"), data.get("expires_at"), data["note"]
                )
            )
        return Response(MuteOut(mute_found(mute.pk)).data)
