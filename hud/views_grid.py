"""The grid (`/`), commit (`/commit/<sha>`) and PR (`/pr/<number>`) pages. Server-rendered; htmx
refreshes the data region from the same URL (HX-Request answers with the partial), so every
state lives in the query string. A failed query renders an error state, never an empty page."""

from django.conf import settings
from django.db import DatabaseError
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from relay.inputs.params import int_list_param
from relay.policy.run_links import run_host, run_host_trusted
from relay.results.baseline import commit_baseline
from relay.results.bisections import bisections_of_commit, culprits_landed_by, probes_on_commit
from relay.results.culprits import commit_streaks
from relay.results.heads import sha_resolve

from .paging import tests_page
from .rendering import page, unavailable
from .selectors_causes import commit_cause_groups
from .selectors_commit import commit_detail
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
from .selectors_tests import baseline_states
from .templatetags.hud_tags import job_log_url


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
        return unavailable(request, "hud/grid.html", context, exc)
    return page(request, "hud/grid.html", context)


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
    except DatabaseError as exc:
        return unavailable(request, "hud/_tooltip.html", {}, exc, partial=None)
    return page(
        request,
        "hud/_tooltip.html",
        {"tip": tip, "key": request.GET.get("tip", "")},
        status=200 if tip else 404,
        partial=None,
    )


def _job_log(request):
    """`?log=<sha>.<backend id>[&job=<workflow / job>]`: a double-clicked cell goes to its job's log."""
    key = parse_cell_key(request.GET.get("log", ""))
    context = {"key": request.GET.get("log", ""), "job": request.GET.get("job", "")[:300]}
    try:
        job, provider = cell_log_job(*key, job=context["job"]) if key else (None, "")
    except DatabaseError as exc:
        return unavailable(request, "hud/no_log.html", context, exc, partial=None)
    url = job_log_url(job) if job else ""
    if url and run_host_trusted(url, provider):
        return redirect(url)
    if url:  # never lend our origin to a host the backend's CI provider does not own
        context.update(url=url, host=run_host(url))
        return page(request, "hud/log_elsewhere.html", context, partial=None)
    context["job_found"] = job is not None
    return page(request, "hud/no_log.html", context, status=400 if key is None else 404, partial=None)


@require_GET
def commit(request, sha):
    context = {"nav": "grid", "requested_sha": sha, **_open_backends(request.GET.get("open", ""))}
    context["tests_page"] = tests_at = tests_page(request.GET)
    try:
        match = sha_resolve(sha)
        full_sha, recorded = match.sha, match.commit
        if full_sha is None:
            context["candidates"] = match.candidates
            return page(request, "hud/commit.html", context, status=404)
        detail, baseline = commit_detail(full_sha, recorded, tests_at), commit_baseline(full_sha)
        baseline_states(baseline)
        since, probes = commit_streaks(recorded, detail), probes_on_commit(full_sha)
        rows = [
            (b, baseline.for_backend(b.project.id), since.get(b.project.id, []), probes.get(b.project.id, []))
            for b in detail.backends
        ]
        context.update(
            sha=full_sha,
            detail=detail,
            baseline=baseline,
            backend_rows=rows,
            baseline_rows=[(b, probes.get(b.project_id, [])) for b in baseline.backends],
            probed=bool(probes),
            culprit_window=settings.CRCR_CULPRIT_WINDOW,
            bisections=bisections_of_commit(full_sha),
            cause_groups=commit_cause_groups(full_sha),
        )
    except DatabaseError as exc:
        return unavailable(request, "hud/commit.html", context, exc)
    return page(request, "hud/commit.html", context)


def _open_backends(value: str) -> dict:
    """`?open=3,7` expands those backends' sections on the commit page, `?open=all` every one."""
    return {"open_all": value == "all", "open_backends": int_list_param(value)}


@require_GET
def pull_request(request, number):
    number = int(number)
    context = {"nav": "grid", "number": number}
    try:
        context["pr"] = pr = pr_page(number)
        context["bisections"] = culprits_landed_by(number)
        context["cause_groups"] = commit_cause_groups(pr.heads[0].sha if pr.heads else "")
    except DatabaseError as exc:
        return unavailable(request, "hud/pr.html", context, exc)
    return page(request, "hud/pr.html", context, status=200 if pr.heads or pr.landed or context["bisections"] else 404)
