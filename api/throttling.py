"""Per-token API throttling."""

from rest_framework.throttling import SimpleRateThrottle

from relay.ops.cache import cache_failed, cache_paused

from .models import ApiToken


class TokenRateThrottle(SimpleRateThrottle):
    """Per API token when one is used, per client address otherwise (the peer, or the address
    CRCR_TRUSTED_PROXY_COUNT proxies of our own vouch for; never a header a client chose). With
    the cache down it lets requests through, like the callback limiter: a read is never lost to it."""

    scope = "api"

    def get_cache_key(self, request, view):
        if isinstance(request.auth, ApiToken):
            ident = f"token:{request.auth.pk}"
        else:
            ident = f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}

    def allow_request(self, request, view):
        if cache_paused():
            return True
        try:
            return super().allow_request(request, view)
        except Exception as exc:  # noqa: BLE001 - any cache failure degrades to "allowed"
            cache_failed("API throttle", exc)
            return True
