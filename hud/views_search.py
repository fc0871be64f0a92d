"""/search?q=: the top bar's search box. One match redirects there; several are listed; none is a
404 page that says what was tried."""

import logging

from django.db import DatabaseError
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from .selectors_search import MAX_QUERY, SearchResult, search

logger = logging.getLogger(__name__)


@require_GET
def search_view(request):
    query = request.GET.get("q", "")
    context = {"nav": "search", "query": query.strip()}
    if len(query) > MAX_QUERY:
        context["error"] = (
            f"The search is {len(query)} characters long; a PR number, SHA or backend name is at most {MAX_QUERY}."
        )
        return render(request, "hud/search.html", context, status=400)
    if not query.strip():
        return render(request, "hud/search.html", context)
    try:
        result = search(query)
    except DatabaseError as exc:
        logger.exception("search query failed")
        context["error"] = f"The database query failed ({type(exc).__name__}); this is an error, not “nothing found”."
        return render(request, "hud/search.html", context, status=503)
    return _answer(request, result, context)


def _answer(request, result: SearchResult, context: dict):
    if result.url:
        return redirect(result.url)
    context["result"] = result
    return render(request, "hud/search.html", context, status=200 if result.found else 404)
