"""ETags for API reads."""

import hashlib

from django.http import HttpResponseNotModified


class ETagMiddleware:
    """Strong ETags on successful API reads, and 304 for a matching If-None-Match: scripts that
    poll pay for a hash, not a transfer."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            request.method not in ("GET", "HEAD")
            or response.status_code != 200
            or not request.path.startswith("/api/v1/")
        ):
            return response
        if getattr(response, "streaming", False):
            return response
        etag = '"' + hashlib.sha256(response.content).hexdigest()[:32] + '"'
        response["ETag"] = etag
        if etag in [tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")]:
            not_modified = HttpResponseNotModified()
            not_modified["ETag"] = etag
            return not_modified
        return response
