import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from api.models import BACKEND_SCOPE, ApiToken, BackendMaintainer
from relay.models import Project


@pytest.fixture
def api():
    return APIClient()


def _client(username: str, scopes: list[str]) -> APIClient:
    """A token whose owner holds what its scopes need (a token never exceeds its owner)."""
    if "admin" in scopes:
        user = get_user_model().objects.create_superuser(username, f"{username}@example.org", None)
    else:
        user = get_user_model().objects.create_user(username)
    if "write:projects" in scopes:
        user.user_permissions.add(
            *Permission.objects.filter(content_type__app_label="relay", codename__in=["add_project", "change_project"])
        )
    for scope in scopes:
        if scope.startswith(BACKEND_SCOPE):  # its maintainer, as an admin made them
            for project in Project.objects.filter(full_name__iexact=scope[len(BACKEND_SCOPE) :]):
                BackendMaintainer.objects.create(user=user, project=project, granted_by="admin")
    _, raw = ApiToken.issue(user, f"{username}'s token", scopes)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw}")
    client.raw_token = raw
    return client


@pytest.fixture
def alice(db):
    """Maintains the registry: write:projects."""
    return _client("alice", ["read", "write:projects"])


@pytest.fixture
def bob(db):
    """Reads only."""
    return _client("bob", ["read"])


@pytest.fixture
def carol(db):
    """Admin."""
    return _client("carol", ["admin"])
