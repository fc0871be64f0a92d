"""The API's JSON bodies, read by the one reader of JSON from outside (relay.inputs.jsonin): nesting
capped at relay.inputs.jsonin.MAX_DEPTH, NaN/±Infinity, numbers no double holds, a NUL and a lone
surrogate refused, each as a 400 naming what is wrong. DRF's own parser recursed once per level:
a write 5,000 levels deep was a RecursionError, a 500, for any token holder."""

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from relay.inputs import jsonin


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = parsers.get_encoding(parser_context or {})
        try:
            return jsonin.checked(stream.read().decode(encoding))
        except UnicodeDecodeError as exc:
            raise ParseError(f"JSON parse error - the body is not {encoding} text") from exc
        except ValueError as exc:  # jsonin.NotStorable and json's own errors
            raise ParseError(f"JSON parse error - {str(exc)[:300]}") from exc
