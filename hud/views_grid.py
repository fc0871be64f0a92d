"""The grid (`/`), commit (`/commit/<sha>`) and PR (`/pr/<number>`) pages. Server-rendered; htmx
refreshes the data region from the same URL (HX-Request answers with the partial), so every
state lives in the query string. A failed query renders an error state, never an empty page."""

import logging

from django.conf import settings
from django.db import DatabaseError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from .baseline import commit_baseline
from .culprits import commit_streaks
from .selectors_commit import commit_detail, resolve_commit
from .selectors_grid import (
    LEVELS,
    PER_PAGE,
    GridFilters,
    cell_log_job,
    cell_tooltip,
    grid_page,
    parse_cell_key,
    pr_page,
)
from .templatetags.hud_tags import job_log_url

logger = logging.getLogger(__name__)


def _render(request, template: str, context: dict, status: int = 200, partial: str = "region"):
    """The full page, or only its data region for htmx's refresh."""
    name = f"{template}#{partial}" if request.headers.get("HX-Request") else template
    response = render(request, name, context, status=status)
    response["Vary"] = "HX-Request"
    return response


DATABASE_UNAVAILABLE = "The database did not answer, so this page could not be loaded. This is an error, not an empty result; retry shortly."
"""What a visitor is told; the exception itself (hosts, users, SQL) goes to the log only."""


def _failed(request, template: str, context: dict, exc: Exception):
    logger.exception("HUD page query failed")
    context["error"] = DATABASE_UNAVAILABLE
    response = _render(request, template, context, status=503)
    response["Retry-After"] = "30"
    return response


@require_GET
def grid(request):
    if "tip" in request.GET:
        return _tooltip(request)
    if "log" in request.GET:
        return _job_log(request)
    filters = GridFilters.from_query(request.GET)
    context = {"nav": "grid", "filters": filters, **_grid_links(filters)}
    try:
        context["grid"] = grid_page(filters)
    except DatabaseError as exc:
        return _failed(request, "hud/grid.html", context, exc)
    return _render(request, "hud/grid.html", context)


def _grid_links(filters: GridFilters) -> dict:
    return {
        "current_query": filters.query(page=filters.page),
        "trunk_query": filters.query(heads="trunk"),
        "pr_query": filters.query(heads="pr"),
        "prev_query": filters.query(page=filters.page - 1),
        "next_query": filters.query(page=filters.page + 1),
        "first_page_query": filters.query(),
        "no_failures_query": filters.query(failures_only=False, page=filters.page),
        "level_choices": LEVELS,
        "per_page": PER_PAGE,
    }


def _tooltip(request):
    key = parse_cell_key(request.GET.get("tip", ""))
    try:
        tip = cell_tooltip(*key) if key else None
    except DatabaseError:
        logger.exception("tooltip query failed")
        return render(request, "hud/_tooltip.html", {"error": DATABASE_UNAVAILABLE}, status=503)
    return render(request, "hud/_tooltip.html", {"tip": tip, "key": request.GET.get("tip", "")}, status=200 if tip else 404)


def _job_log(request):
    """`?log=<sha>.<backend id>[&job=<workflow / job>]`: a double-clicked cell goes to its job's log."""
    key = parse_cell_key(request.GET.get("log", ""))
    context = {"key": request.GET.get("log", ""), "job": request.GET.get("job", "")[:300]}
    try:
        job = cell_log_job(*key, job=context["job"]) if key else None
    except DatabaseError as exc:
        return _failed(request, "hud/no_log.html", context, exc)
    url = job_log_url(job) if job else ""
    if url:
        return redirect(url)
    context["job_found"] = job is not None
    return render(request, "hud/no_log.html", context, status=400 if key is None else 404)


@require_GET
def commit(request, sha):
    context = {"nav": "grid", "requested_sha": sha, **_open_backends(request.GET.get("open", ""))}
    try:
        full_sha, recorded = resolve_commit(sha)
        if full_sha is None:
            return _render(request, "hud/commit.html", context, status=404)
        detail, baseline = commit_detail(full_sha, recorded), commit_baseline(full_sha)
        since = commit_streaks(recorded, detail)
        rows = [(b, baseline.for_backend(b.project.id), since.get(b.project.id, [])) for b in detail.backends]
        context.update(sha=full_sha, detail=detail, baseline=baseline, backend_rows=rows, culprit_window=settings.CRCR_CULPRIT_WINDOW)
    except DatabaseError as exc:
        return _failed(request, "hud/commit.html", context, exc)
    return _render(request, "hud/commit.html", context)


def _open_backends(value: str) -> dict:
    """`?open=3,7` expands those backends' sections on the commit page, `?open=all` every one."""
    ids = {int(part) for part in value.split(",")[:200] if part.strip().isdigit() and len(part.strip()) < 10}
    return {"open_all": value == "all", "open_backends": ids}


@require_GET
def pull_request(request, number):
    number = int(number)
    context = {"nav": "grid", "number": number}
    try:
        context["pr"] = page = pr_page(number)
    except DatabaseError as exc:
        return _failed(request, "hud/pr.html", context, exc)
    return _render(request, "hud/pr.html", context, status=200 if page.heads else 404)
