"""Reads are public; writes need a token with the right scope (or a staff session)."""

from rest_framework import permissions

from .models import ApiToken, Scope, user_may


def _has_scope(request, scope: str) -> bool:
    if isinstance(request.auth, ApiToken):
        return request.auth.allows(scope)
    user = request.user
    return bool(user and user.is_authenticated and user.is_staff and user_may(user, scope))


class ScopedWrite(permissions.BasePermission):
    """Safe methods for everyone; other methods need `view.write_scope`."""

    message = "this action needs an API token with the required scope"

    def has_permission(self, request, view):
        if request.method in permissions.SAFE_METHODS:
            return True
        if not (request.user and request.user.is_authenticated):
            return False
        scope = getattr(view, "write_scope", Scope.ADMIN)
        self.message = f"this action needs an API token with the '{getattr(scope, 'value', scope)}' scope"
        return _has_scope(request, scope)


class OperatorRead(ScopedWrite):
    """Operator data (webhook deliveries, dispatches and their errors): reads need a staff session
    or an API token, not an anonymous client."""

    message = "operator data: sign in as staff or send an API token"

    def has_permission(self, request, view):
        if request.method in permissions.SAFE_METHODS:
            if isinstance(request.auth, ApiToken):
                return request.auth.allows(Scope.READ)
            return bool(request.user and request.user.is_authenticated and request.user.is_staff)
        return super().has_permission(request, view)
