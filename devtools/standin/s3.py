"""An S3-shaped public bucket, path-style (`/_s3/<bucket>/<key>`): PyTorch's test jobs upload
their JUnit zips to the public `gha-artifacts` bucket, read by anonymous HTTPS GET. A missing key
answers as S3 does to an anonymous reader of a bucket it may list: 404 with a NoSuchKey XML body
(403 AccessDenied where listing is not public; `deny_missing` makes a bucket answer that way)."""

from xml.sax.saxutils import escape

from werkzeug.wrappers import Response

from .http import Call, Routes

route = Routes()
XML_TYPE = "application/xml"


class Buckets:
    def __init__(self):
        self.objects: dict[tuple[str, str], bytes] = {}
        self.deny_missing: set[str] = set()


def buckets(world) -> Buckets:
    if not hasattr(world, "s3"):
        world.s3 = Buckets()
    return world.s3


def _error(status: int, code: str, message: str, key: str) -> Response:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message><Key>{escape(key)}</Key>"
        "<RequestId>STANDIN</RequestId></Error>"
    )
    return Response(body, status=status, content_type=XML_TYPE)


@route("/_s3/<bucket>/<path:key>", "GET")
def get_object(call: Call, bucket: str, key: str):
    state = buckets(call.standin.world)
    data = state.objects.get((bucket, key))
    if data is not None:
        return Response(data, status=200, content_type="application/zip")
    if bucket in state.deny_missing:
        return _error(403, "AccessDenied", "Access Denied", key)
    return _error(404, "NoSuchKey", "The specified key does not exist.", key)


def add_object(world, bucket: str, key: str, data: bytes) -> None:
    buckets(world).objects[(bucket, key.lstrip("/"))] = data
