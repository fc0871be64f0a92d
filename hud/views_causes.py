"""Failure causes: the list (filters in the URL, as GET /api/v1/causes takes them), one cause
with its impact and trend, and a known issue made from a cause in one click."""

from django.contrib.auth.decorators import login_required, permission_required
from django.db import DatabaseError
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_POST

from relay.triage import issues as issue_services

from .rendering import page, unavailable
from .selectors_causes import FilterError, backend_choices, cause_page, cause_query, causes_page, suggested_issue


@require_GET
def causes(request):
    params = {k: request.GET.get(k, "") for k in request.GET}
    context = {"nav": "issues", "params": params}
    try:
        context["choices"] = backend_choices()
        query = cause_query(request.GET)
    except FilterError as exc:
        context["filter_error"] = str(exc)
        return page(request, "hud/causes.html", context, status=400, partial=None)
    except DatabaseError as exc:
        return unavailable(request, "hud/causes.html", context, exc, partial=None)
    context["query"] = query
    try:
        context["rows"] = causes_page(query)
    except DatabaseError as exc:
        return unavailable(request, "hud/causes.html", context, exc, partial=None)
    return page(request, "hud/causes.html", context, partial=None)


@require_GET
def cause(request, pk: int):
    context = {"nav": "issues", "may_add": request.user.has_perm("relay.add_knownissue")}
    try:
        found = cause_page(pk)
    except DatabaseError as exc:
        return unavailable(request, "hud/cause.html", context, exc, partial=None)
    if found is None:
        raise Http404("no such cause")
    context.update(found)
    return page(request, "hud/cause.html", context, partial=None)


@login_required
@permission_required("relay.add_knownissue", raise_exception=True)
@require_POST
def cause_known_issue(request, pk: int):
    """The suggested known issue of a cause, made in one click: its rule, its title, upstream's
    when the reference fails through it too; the issue's page then lets it be refined."""
    fields = suggested_issue(pk)
    if fields is None:
        raise Http404("no such cause")
    issue = issue_services.known_issue_create(fields, by=request.user.get_username())
    return redirect("hud-known-issue", pk=issue.pk)
