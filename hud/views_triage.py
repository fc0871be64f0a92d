"""Triage pages: known issues (list, one issue with its occurrences, the "mark as known" form and
resolve/reopen), suggested issues, and expected failures that keep passing. Reads are public;
creating and changing issues needs a signed-in user with the relay's known-issue permissions."""

from django.contrib.auth.decorators import login_required, permission_required
from django.db import DatabaseError
from django.http import Http404
from django.shortcuts import redirect
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from relay.inputs.params import int_param
from relay.results.cells import registered_backends
from relay.triage import issues as issue_services

from .forms import KnownIssueForm
from .rendering import page, unavailable
from .selectors_triage import (
    ISSUE_STATES,
    backend_exists,
    known_issue_find,
    known_issue_page,
    known_issues_list,
    suggestions,
    unexpectedly_passing,
)


@require_GET
def known_issues(request):
    state = request.GET.get("state", "open")
    state = state if state in (*ISSUE_STATES, "all") else "open"
    context = {"nav": "issues", "state": state, "states": ["open", "resolved", "all"]}
    try:
        context["rows"] = known_issues_list("" if state == "all" else state)
        context["unexpected"] = unexpectedly_passing([p for p in registered_backends() if not p.is_reference])
    except DatabaseError as exc:
        return unavailable(request, "hud/known_issues.html", context, exc, partial=None)
    return page(request, "hud/known_issues.html", context, partial=None)


@require_GET
def known_issue(request, pk: int):
    issue = _issue_or_404(pk)
    context = {"nav": "issues", "issue": issue, "may_change": request.user.has_perm("relay.change_knownissue")}
    try:
        context["page"] = known_issue_page(issue)
    except DatabaseError as exc:
        return unavailable(request, "hud/known_issue.html", context, exc, partial=None)
    return page(request, "hud/known_issue.html", context, partial=None)


@login_required
@permission_required("relay.add_knownissue", raise_exception=True)
@require_http_methods(["GET", "POST"])
def known_issue_new(request):
    may_unblock = request.user.is_superuser
    if request.method == "POST":
        form = KnownIssueForm(request.POST, may_unblock=may_unblock)
        if form.is_valid():
            issue = _create(form.cleaned_data, request.user.get_username(), may_unblock)
            return redirect("hud-known-issue", pk=issue.pk)
        return page(request, "hud/known_issue_form.html", {"nav": "issues", "form": form}, status=400, partial=None)
    form = KnownIssueForm(initial=_initial(request.GET), may_unblock=may_unblock)
    context = {"nav": "issues", "form": form, "from_sha": request.GET.get("sha", "")[:40]}
    return page(request, "hud/known_issue_form.html", context, partial=None)


def _initial(query) -> dict:
    """Pre-filled from one failure: its test id (or job label), the backend it failed on."""
    initial = {
        "title": query.get("title", "")[:200],
        "test_patterns": query.get("pattern", "")[:200],
        "kind": query.get("kind", "product"),
        "cause": query.get("cause", "")[:520],
    }
    project = int_param(query.get("project"))
    if project is not None and backend_exists(project):
        initial.update(all_backends=False, projects=[project])
    for pattern in query.getlist("also")[:20]:
        initial["test_patterns"] += "\n" + pattern[:200]
    return initial


def _create(data: dict, by: str, may_unblock: bool):
    fields = {
        k: data[k] for k in ("title", "url", "kind", "test_patterns", "message_contains", "cause", "all_backends")
    }
    fields["blocks_gate"] = data["blocks_gate"] if may_unblock else True  # the form hides the box
    projects = [] if data["all_backends"] else list(data["projects"])
    return issue_services.known_issue_create(fields, by=by, projects=projects, may_unblock=may_unblock)


@login_required
@permission_required("relay.change_knownissue", raise_exception=True)
@require_POST
def known_issue_state(request, pk: int):
    issue = _issue_or_404(pk)
    state = request.POST.get("state", "")
    if state not in ISSUE_STATES:
        context = {"nav": "issues", "detail": "state must be open or resolved"}
        return page(request, "hud/known_issue_bad.html", context, status=400, partial=None)
    issue_services.known_issue_update(issue, {"state": state})
    return redirect("hud-known-issue", pk=issue.pk)


@require_GET
def suggested(request):
    context = {"nav": "issues"}
    try:
        context["suggestions"] = suggestions()
    except DatabaseError as exc:
        return unavailable(request, "hud/suggested.html", context, exc, partial=None)
    return page(request, "hud/suggested.html", context, partial=None)


def _issue_or_404(pk: int):
    issue = known_issue_find(pk)
    if issue is None:
        raise Http404("no known issue with that number")
    return issue
