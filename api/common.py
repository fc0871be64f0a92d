"""What every endpoint shares: cursor pagination and one error shape."""

from datetime import datetime

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.pagination import CursorPagination
from rest_framework.views import exception_handler

from relay.inputs.params import int_param


class Cursor(CursorPagination):
    """Cursor pagination whose cursor is checked before it reaches the database: the position it
    carries must be a value of the ordering field (a crafted `p=abc` is a 404, not a 500)."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
    ordering = "-id"

    def get_page_size(self, request):
        """`page_size` in ASCII digits (relay.inputs.params), at most max_page_size; else the default."""
        asked = int_param(request.query_params.get(self.page_size_query_param), low=1)
        return min(asked, self.max_page_size) if asked is not None else self.page_size

    def paginate_queryset(self, queryset, request, view=None):
        self._model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request):
        cursor = super().decode_cursor(request)
        if cursor is not None and cursor.position is not None and not self._position_valid(cursor.position):
            raise exceptions.NotFound(self.invalid_cursor_message)
        return cursor

    def _position_valid(self, position: str) -> bool:
        field = self._model._meta.get_field(self.ordering[0].lstrip("-"))
        try:
            value = field.to_python(position)
        except (DjangoValidationError, ValueError, TypeError, OverflowError):
            return False
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            return False
        if isinstance(value, datetime) and not 1 <= value.year <= 9998:
            return False
        return value is not None


def error_handler(exc, context):
    """Every error, 4xx or 5xx, answers {"detail": str, "code": str[, "errors": {...}]}."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    if isinstance(exc, DjangoValidationError):
        # Services validate with Django's exception; the API reports it like any input error.
        exc = exceptions.ValidationError(
            exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages}
        )
    response = exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if isinstance(exc, exceptions.ValidationError):
        body = {
            "detail": "invalid input",
            "code": "invalid",
            "errors": data if isinstance(data, dict) else {"non_field_errors": data},
        }
    else:
        body = {
            "detail": str(data.get("detail", data)) if isinstance(data, dict) else str(data),
            "code": getattr(exc, "default_code", "error"),
        }
        if isinstance(data, dict) and hasattr(data.get("detail"), "code"):
            body["code"] = data["detail"].code
    response.data = body
    return response


def server_error(request, *args, **kwargs):
    from django.http import JsonResponse

    return JsonResponse(
        {"detail": "internal server error", "code": "server_error"}, status=status.HTTP_500_INTERNAL_SERVER_ERROR
    )
