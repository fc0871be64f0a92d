"""Triage pages: known issues (list, one issue with its occurrences, the "mark as known" form and
resolve/reopen), suggested issues, and expected failures that keep passing. Reads are public;
creating and changing issues needs a signed-in user with the relay's known-issue permissions."""

import logging

from django.contrib.auth.decorators import login_required, permission_required
from django.db import DatabaseError
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from relay.models import KnownIssue, Project
from relay.triage import issues as issue_services

from .forms import KnownIssueForm
from .selectors_commit import registered_backends
from .selectors_triage import known_issue_page, known_issues_list, suggestions, unexpectedly_passing

logger = logging.getLogger(__name__)


def _unavailable(request, template: str, context: dict, exc: Exception):
    logger.warning("triage page %s: database error: %s", request.path, exc)
    return render(request, template, {**context, "error": f"{type(exc).__name__}: {exc}"}, status=503)


@require_GET
def known_issues(request):
    state = request.GET.get("state", "open")
    state = state if state in (*KnownIssue.State.values, "all") else "open"
    context = {"nav": "issues", "state": state, "states": ["open", "resolved", "all"]}
    try:
        context["rows"] = known_issues_list("" if state == "all" else state)
        context["unexpected"] = unexpectedly_passing([p for p in registered_backends() if not p.is_reference])
    except DatabaseError as exc:
        return _unavailable(request, "hud/known_issues.html", context, exc)
    return render(request, "hud/known_issues.html", context)


@require_GET
def known_issue(request, pk: int):
    issue = get_object_or_404(KnownIssue.objects.prefetch_related("projects"), pk=pk)
    context = {"nav": "issues", "issue": issue, "may_change": request.user.has_perm("relay.change_knownissue")}
    try:
        context["page"] = known_issue_page(issue)
    except DatabaseError as exc:
        return _unavailable(request, "hud/known_issue.html", context, exc)
    return render(request, "hud/known_issue.html", context)


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
        return render(request, "hud/known_issue_form.html", {"nav": "issues", "form": form}, status=400)
    form = KnownIssueForm(initial=_initial(request.GET), may_unblock=may_unblock)
    return render(
        request,
        "hud/known_issue_form.html",
        {"nav": "issues", "form": form, "from_sha": request.GET.get("sha", "")[:40]},
    )


def _initial(query) -> dict:
    """Pre-filled from one failure: its test id (or job label), the backend it failed on."""
    initial = {
        "title": query.get("title", "")[:200],
        "test_patterns": query.get("pattern", "")[:200],
        "kind": query.get("kind", "product"),
    }
    project = query.get("project", "")
    if project.isdigit() and Project.objects.filter(pk=int(project)).exists():
        initial.update(all_backends=False, projects=[int(project)])
    for pattern in query.getlist("also")[:20]:
        initial["test_patterns"] += "\n" + pattern[:200]
    return initial


def _create(data: dict, by: str, may_unblock: bool) -> KnownIssue:
    fields = {k: data[k] for k in ("title", "url", "kind", "test_patterns", "message_contains", "all_backends")}
    fields["blocks_gate"] = data["blocks_gate"] if may_unblock else True
    projects = [] if data["all_backends"] else list(data["projects"])
    return issue_services.known_issue_create(fields, by=by, projects=projects)


@login_required
@permission_required("relay.change_knownissue", raise_exception=True)
@require_POST
def known_issue_state(request, pk: int):
    issue = get_object_or_404(KnownIssue, pk=pk)
    state = request.POST.get("state", "")
    if state not in KnownIssue.State.values:
        return render(
            request,
            "hud/known_issue_bad.html",
            {"nav": "issues", "detail": "state must be open or resolved"},
            status=400,
        )
    issue_services.known_issue_update(issue, {"state": state})
    return redirect("hud-known-issue", pk=issue.pk)


@require_GET
def suggested(request):
    context = {"nav": "issues"}
    try:
        context["suggestions"] = suggestions()
    except DatabaseError as exc:
        return _unavailable(request, "hud/suggested.html", context, exc)
    return render(request, "hud/suggested.html", context)
