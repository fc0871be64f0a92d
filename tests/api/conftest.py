import pytest
from django.contrib.auth import get_user_model
from rest_framework.test import APIClient

from api.models import ApiToken


@pytest.fixture
def api():
    return APIClient()


def _client(username: str, scopes: list[str]) -> APIClient:
    user = get_user_model().objects.create_user(username)
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
