"""/search?q=: the top bar's search box. One match redirects there; several are listed; none is a
404 page that says what was tried."""

from django.db import DatabaseError
from django.shortcuts import redirect
from django.views.decorators.http import require_GET

from .rendering import page, unavailable
from .selectors_search import MAX_QUERY, SearchResult, search


@require_GET
def search_view(request):
    query = request.GET.get("q", "")
    context = {"nav": "search", "query": query.strip()}
    if len(query) > MAX_QUERY:
        context["error"] = (
            f"The search is {len(query)} characters long; a PR number, SHA or backend name is at most {MAX_QUERY}."
        )
        return page(request, "hud/search.html", context, status=400, partial=None)
    if not query.strip():
        return page(request, "hud/search.html", context, partial=None)
    try:
        result = search(query)
    except DatabaseError as exc:
        return unavailable(request, "hud/search.html", context, exc, partial=None)
    return _answer(request, result, context)


def _answer(request, result: SearchResult, context: dict):
    if result.url:
        return redirect(result.url)
    context["result"] = result
    return page(request, "hud/search.html", context, status=200 if result.found else 404, partial=None)
