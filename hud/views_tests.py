"""`/test/<identity>`: one test's history across upstream commits and backends (the identity
URL-encoded, as relay.policy.testids gives it; the page's cursor in the query string)."""

from django.db import DatabaseError
from django.views.decorators.http import require_GET

from relay.results.bisections import bisections_of_test
from relay.results.tests import OUTCOMES, BadCursor

from .rendering import page, unavailable
from .selectors_tests import test_page

MAX_IDENTITY = 2100


@require_GET
def test_view(request, identity: str):
    context = {"nav": "test", "identity": identity, "outcomes": OUTCOMES}
    if len(identity) > MAX_IDENTITY:
        context["error_text"] = f"A test id is at most {MAX_IDENTITY} characters; this one has {len(identity)}."
        return page(request, "hud/test.html", context, status=400)
    try:
        context["page"] = found = test_page(identity, request.GET.get("after") or None)
        context["bisections"] = found.history.bisections if found.history else bisections_of_test(identity)
    except BadCursor as exc:
        context["error_text"] = str(exc)
        return page(request, "hud/test.html", context, status=400)
    except DatabaseError as exc:
        return unavailable(request, "hud/test.html", context, exc)
    return page(request, "hud/test.html", context, status=200 if found.history else 404)


test_view.__test__ = False
