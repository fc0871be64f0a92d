"""`Authorization: Bearer crcr_…` (or `Token crcr_…`) → the token's user, with the token as auth."""

from django.utils import timezone
from rest_framework import authentication, exceptions

from .models import TOKEN_PREFIX, ApiToken, token_hash

LAST_USED_RESOLUTION_SECONDS = 60
"""Write last_used_at at most once a minute per token, not on every request."""


class ApiTokenAuthentication(authentication.BaseAuthentication):
    keywords = ("bearer", "token")

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode(errors="replace").split()
        if len(header) != 2 or header[0].lower() not in self.keywords or not header[1].startswith(TOKEN_PREFIX):
            return None
        token = ApiToken.objects.select_related("user").filter(digest=token_hash(header[1])).first()
        if token is None or not token.active:
            raise exceptions.AuthenticationFailed("invalid or revoked API token")
        self._touch(token)
        return token.user, token

    def authenticate_header(self, request):
        return 'Bearer realm="api"'

    def _touch(self, token: ApiToken) -> None:
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > LAST_USED_RESOLUTION_SECONDS:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
