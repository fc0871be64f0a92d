"""Operators' HTML pages."""

from django.contrib.admin.views.decorators import staff_member_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from .checks.outbox import writes_recent
from .selectors import STATUS_FILTERS, DeliveryFilters, deliveries_page, delivery_event_choices


@staff_member_required
@require_GET
def deliveries(request):
    """Operators only: dispatch errors, upstream writes and sandbox details are not for the public."""
    filters = DeliveryFilters.from_query(request.GET)
    page = deliveries_page(filters, request.GET.get("page") or 1)
    choices = delivery_event_choices()
    context = {
        "nav": "deliveries",
        "page": page,
        "filters": filters,
        "events": sorted(choices),
        "actions": sorted({a for actions in choices.values() for a in actions if a}),
        "statuses": list(STATUS_FILTERS),
        "query_without_page": _query_without_page(request),
        "upstream_writes": writes_recent(),
    }
    template = "relay/deliveries.html#rows" if request.headers.get("HX-Request") else "relay/deliveries.html"
    response = render(request, template, context)
    response["Vary"] = "HX-Request"
    return response


def _query_without_page(request) -> str:
    query = request.GET.copy()
    query.pop("page", None)
    return query.urlencode()
