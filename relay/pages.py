"""Operators' HTML pages."""

from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from relay.inputs.params import int_param

from .checks.outbox import writes_recent
from .selectors import STATUS_FILTERS, DeliveryFilters, deliveries_page, delivery_event_choices


@staff_member_required
@require_GET
def deliveries(request):
    """Operators only: dispatch errors, upstream writes and sandbox details are not for the public."""
    filters = DeliveryFilters.from_query(request.GET)
    view = "writes" if request.GET.get("view") == "writes" else "deliveries"
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
        "view": view,
        "upstream_writes": writes_recent() if view == "writes" else None,
    }
    template = "relay/deliveries.html#rows" if request.headers.get("HX-Request") else "relay/deliveries.html"
    response = render(request, template, context)
    response["Vary"] = "HX-Request"
    return response


def _query_without_page(request) -> str:
    query = request.GET.copy()
    query.pop("page", None)
    query.pop("view", None)
    return query.urlencode()


@login_required
@require_GET
def notifications(request):
    """Signed-in only: a subscription is its owner's (names, scopes, what its sink answered);
    staff see every one, as on the deliveries page, and everyone else only their own."""
    from .models.notify import Notification
    from .notify.selectors import events_recent, notifications_log, subscriptions_visible

    subscription_id = int_param(request.GET.get("subscription"))
    state = request.GET.get("state", "")
    owner = None if request.user.is_staff else request.user
    context = {
        "nav": "notifications",
        "logs": notifications_log(subscription_id, state, owner=owner),
        "events": events_recent(),
        "all_subscriptions": subscriptions_visible(owner)[:200],
        "subscription_id": subscription_id,
        "state": state if state in Notification.State.values else "",
        "states": Notification.State.choices,
    }
    return render(request, "relay/notifications.html", context)
