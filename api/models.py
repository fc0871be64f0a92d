"""Personal API tokens for scripts: created in admin, stored hashed, scoped, revocable."""

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

TOKEN_PREFIX = "crcr_"


class Scope(models.TextChoices):
    READ = "read", "read"
    WRITE_PROJECTS = "write:projects", "write:projects (registry and levels)"
    ADMIN = "admin", "admin (allowlist import, everything)"


BACKEND_SCOPE = "backend:"
"""`backend:<owner>/<repo>`: a backend's maintainer, for that backend only (its mutes). An admin
grants it when issuing the token (api/admin.py); the repo name is stored lower-case."""


def backend_scope(full_name: str) -> str:
    return BACKEND_SCOPE + str(full_name).strip().lower()


def user_may(user, scope: str) -> bool:
    """What the user could do in person: read (any active user), maintain a backend (any active
    user an admin grants it to), change the registry (the add/change project permissions), or
    everything (superuser). A token never exceeds it."""
    if user is None or not user.is_active:
        return False
    if scope == Scope.READ or str(scope).startswith(BACKEND_SCOPE):
        return True
    if scope == Scope.WRITE_PROJECTS:
        return user.has_perms(["relay.add_project", "relay.change_project"])
    return user.is_superuser


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What this token is for, e.g. 'allowlist sync job'")
    prefix = models.CharField(max_length=16, editable=False, help_text="First characters, to recognise the token")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list, help_text="Any of: read, write:projects, admin")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @classmethod
    def issue(cls, user, name: str, scopes: list[str]) -> tuple["ApiToken", str]:
        """Create a token; the raw value is returned once and never stored."""
        raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
        token = cls.objects.create(
            user=user, name=name, prefix=raw[:12], digest=token_hash(raw), scopes=sorted(set(scopes))
        )
        return token, raw

    @property
    def active(self) -> bool:
        return self.revoked_at is None and self.user.is_active

    def allows(self, scope: str) -> bool:
        """The token carries the scope (admin carries all) and its owner may still do it: a token
        minted for someone, or kept after they lost a privilege, can do no more than they can."""
        granted = scope in self.scopes or Scope.ADMIN in self.scopes
        return granted and user_may(self.user, scope)
