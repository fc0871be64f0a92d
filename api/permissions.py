"""Reads are public; writes need a token with the right scope (or a staff session)."""

from rest_framework import permissions

from .models import ApiToken, Scope


def _has_scope(request, scope: str) -> bool:
    if isinstance(request.auth, ApiToken):
        return request.auth.allows(scope)
    user = request.user
    return bool(user and user.is_authenticated and user.is_staff and (scope != Scope.ADMIN or user.is_superuser))


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
