"""The summary (/crcr), per-backend dashboard (/crcr/<org>/<repo>) and trends (/crcr/metrics).

Every view's state (range, event kind, filters, page, grouping, selected cell) lives in the query
string. An htmx request gets the page's refresh fragment (a template partial) instead of the page.
A failed query renders an explicit error state with status 503, never an empty page that would
read as "no data"."""

from urllib.parse import urlencode

from django.conf import settings
from django.db import DatabaseError
from django.views.decorators.http import require_GET

from hud import charts
from hud.health_details import CARDS as HEALTH_CARDS
from hud.health_details import health_details
from hud.rendering import page, unavailable
from hud.selectors_backend import backend_find, cell_detail, dashboard_build
from hud.selectors_causes import backend_causes
from hud.selectors_enablement import enabled_history_page
from hud.selectors_metrics import LEVEL_FILTERS, charted_backends, metrics_build
from hud.selectors_summary import summary_build
from hud.selectors_tests import quality_rows
from relay.inputs.params import int_param
from relay.policy.verdicts import STATES, State
from relay.results.bisections import bisections_of_backend
from relay.results.status import LEGEND
from relay.stats.windows import DEFAULT_TAB, TABS, WINDOWS, default_tab, window_key
from relay.tallies.buckets import TalliesPending

COUNTS_TEXT = {
    "pass": "counts as a pass",
    "fail": "counts as a failure",
    "infra": "infrastructure failure",
    "pending": "not decided yet",
    "none": "counts nowhere",
}
RANGE_LABELS = {key: window.label for key, window in WINDOWS.items()}
"""The same ranges, in the same words, on /crcr, every backend page and /crcr/metrics."""
LEGEND_ROWS = [(value, glyph, label, COUNTS_TEXT[STATES[State(value)].counts.value]) for value, glyph, label in LEGEND]


def _choice(value: str | None, options, default: str) -> str:
    return value if value in options else default


def _page_number(value: str | None) -> int:
    return int_param(value, default=1, low=1, high=9_999)


def _query(params: dict, **changes) -> str:
    """The page's query string with some parameters changed; defaults and blanks left out."""
    merged = {**params, **changes}
    return "?" + urlencode({k: v for k, v in merged.items() if v not in (None, "", False)})


def _options(params: dict, name: str, options: dict, reset: dict | None = None) -> list[dict]:
    return [
        {
            "key": key,
            "label": label,
            "url": _query(params, **{name: key}, **(reset or {})),
            "active": params.get(name) == key,
        }
        for key, label in options.items()
    ]


def _loading(request, template: str, partial: str, context: dict, pending: TalliesPending):
    """Cold caches: answer now with progress; the fragment asks again in a second."""
    return page(request, template, {**context, "pending": pending}, partial=partial)


# --- /crcr ---------------------------------------------------------------------------------------------


@require_GET
def summary(request):
    window, notice = window_key(request.GET.get("range"))
    params = {"range": window, "event": _choice(request.GET.get("event"), TABS, DEFAULT_TAB)}
    context = {
        "nav": "summary",
        "range_notice": notice,
        "params": params,
        "query": _query(params),
        "legend": LEGEND_ROWS,
        "ranges": _options(params, "range", RANGE_LABELS),
        "tabs": _options(params, "event", TABS),
    }
    try:
        context["summary"] = summary_build(params["range"], params["event"])
        context["quality"] = quality_rows(params["range"]) if params["event"] == "pr" else []
        context["quality_charts"] = charts.quality_figures([(r.project.label, r.quality) for r in context["quality"]])
    except TalliesPending as pending:
        return _loading(request, "hud/summary.html", "body", context, pending)
    except DatabaseError as exc:
        return unavailable(request, "hud/summary.html", context, exc, partial="body")
    return page(request, "hud/summary.html", context, partial="body")


@require_GET
def health_card(request, key: str):
    """A health card's details: the dialog's htmx fragment, or a page of its own without JavaScript."""
    context = {"nav": "summary", "cards": list(HEALTH_CARDS)}
    try:
        context["details"] = health_details(key)
    except DatabaseError as exc:
        return unavailable(request, "hud/health_details.html", context, exc, partial="dialog")
    status = 200 if context["details"] else 404
    return page(request, "hud/health_details.html", context, status=status, partial="dialog")


# --- /crcr/<org>/<repo> --------------------------------------------------------------------------------


def _backend_params(request) -> dict:
    get = request.GET
    return {
        "range": window_key(get.get("range"))[0],
        "event": _choice(get.get("event"), TABS, DEFAULT_TAB),
        "page": _page_number(get.get("page")),
        "shards": "split" if get.get("shards") == "split" else "",
        "cell": get.get("cell", "")[:400],
    }


@require_GET
def backend(request, org: str, repo: str):
    params = _backend_params(request)
    context = {"nav": "summary", "params": params, "full_name": f"{org}/{repo}", "legend": LEGEND_ROWS}
    context["range_notice"] = window_key(request.GET.get("range"))[1]
    try:
        project = backend_find(org, repo)
        if project is None:
            return page(request, "hud/backend_404.html", context, status=404, partial=None)
        context["project"] = project
        if "event" not in request.GET:
            params["event"] = default_tab(project)
        if request.headers.get("HX-Target") == "cell-detail":
            context["cell_fragment"] = True
            return _cell_fragment(request, project, params, context)
        _backend_links(context, params)
        context["dash"] = dashboard_build(
            project, params["range"], params["event"], params["page"], grouped=not params["shards"]
        )
        context["detail"] = _cell(project, params)
        context["bisections"] = bisections_of_backend(project.id)
        context["enabled"] = enabled_history_page(project)
        context["causes"] = backend_causes(project)
        quality = context["dash"].quality
        context["quality_charts"] = charts.quality_figures([(project.label, quality)] if quality else [])
    except TalliesPending as pending:
        return _loading(request, "hud/backend.html", "body", context, pending)
    except DatabaseError as exc:
        partial = "cell-detail" if context.get("cell_fragment") else "body"
        return unavailable(request, "hud/backend.html", context, exc, partial=partial)
    return page(request, "hud/backend.html", context, partial="body")


def _backend_links(context: dict, params: dict) -> None:
    base = {k: v for k, v in params.items() if k != "cell"}
    query = _query(base)
    context.update(
        {
            "query": query,
            "ranges": _options(base, "range", RANGE_LABELS, reset={"page": None}),
            "tabs": _options(base, "event", TABS, reset={"page": None}),
            "shards_url": _query(base, shards="" if params["shards"] else "split"),
            "prev_url": _query(base, page=params["page"] - 1) if params["page"] > 1 else "",
            "next_url": _query(base, page=params["page"] + 1),
            "cell_base": query + ("&" if len(query) > 1 else "") + "cell=",
            "culprit_window": settings.CRCR_CULPRIT_WINDOW,
        }
    )


def _cell(project, params: dict):
    sha, _, column = params["cell"].partition(":")
    if not sha or not column:
        return None
    return cell_detail(project, params["event"], sha, column, grouped=not params["shards"])


def _cell_fragment(request, project, params: dict, context: dict):
    context["detail"] = _cell(project, params)
    return page(request, "hud/backend.html#cell-detail", context, partial=None)


# --- /crcr/metrics -------------------------------------------------------------------------------------


@require_GET
def metrics(request):
    get = request.GET
    window, notice = window_key(get.get("range"))
    params = {
        "range": window,
        "event": _choice(get.get("event"), TABS, DEFAULT_TAB),
        "level": _choice(get.get("level"), LEVEL_FILTERS, "all"),
        "backend": get.get("backend", "")[:140],
    }
    context = {
        "nav": "metrics",
        "range_notice": notice,
        "params": params,
        "query": _query(params),
        "legend": LEGEND_ROWS,
        "ranges": _options(params, "range", RANGE_LABELS),
        "tabs": _options(params, "event", TABS),
        "levels": LEVEL_FILTERS,
    }
    try:
        context["choices"] = charted_backends()
        data = metrics_build(params["range"], params["event"], params["level"], params["backend"])
        context.update({"metrics": data, "figures": charts.metrics_figures(data) if data.with_data else []})
    except TalliesPending as pending:
        return _loading(request, "hud/metrics.html", "body", context, pending)
    except DatabaseError as exc:
        return unavailable(request, "hud/metrics.html", context, exc, partial="body")
    return page(request, "hud/metrics.html", context, partial="body")
