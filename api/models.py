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
"""`backend:<owner>/<repo>`: a backend's maintainer, for that backend only (its mutes). Only a
user a BackendMaintainer row names (or a superuser) may carry it; the repo name is stored
lower-case."""


def backend_scope(full_name: str) -> str:
    return BACKEND_SCOPE + str(full_name).strip().lower()


def user_may(user, scope: str) -> bool:
    """What the user could do in person: read (any active user), maintain a backend (a superuser,
    or a user a BackendMaintainer row names for it), change the registry (the add/change project
    permissions), or everything (superuser). A token never exceeds it: checked on every request."""
    if user is None or not user.is_active:
        return False
    if scope == Scope.READ:
        return True
    if str(scope).startswith(BACKEND_SCOPE):
        return user.is_superuser or maintains(user, str(scope)[len(BACKEND_SCOPE) :])
    if scope == Scope.WRITE_PROJECTS:
        return user.has_perms(["relay.add_project", "relay.change_project"])
    return user.is_superuser


def maintains(user, full_name: str) -> bool:
    return BackendMaintainer.objects.filter(user=user, project__full_name__iexact=full_name).exists()


class BackendMaintainer(models.Model):
    """Who maintains which backend: the one place `backend:<owner>/<repo>` comes from. Rows are
    made in admin by a superuser or whoever was given `api.add_backendmaintainer` for it; a staff
    member who may only add API tokens cannot make one (a token of theirs once granted itself
    any backend's scope, and with it that backend's mutes)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="maintains")
    project = models.ForeignKey("relay.Project", on_delete=models.CASCADE, related_name="maintainers")
    granted_by = models.CharField(max_length=150, editable=False)
    granted_at = models.DateTimeField(default=timezone.now, editable=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "project"], name="backend_maintainer_once")]
        verbose_name = "backend maintainer"

    def __str__(self):
        return f"{self.user} maintains {self.project}"


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
