"""Per-token API throttling."""

from rest_framework.throttling import SimpleRateThrottle

from .models import ApiToken


class TokenRateThrottle(SimpleRateThrottle):
    """Per API token when one is used, per client address otherwise."""

    scope = "api"

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiToken):
            ident = f"token:{request.auth.pk}"
        else:
            ident = f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}
