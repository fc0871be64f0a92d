"""How every HUD view answers: the full page, or only its refresh fragment for htmx (a template
partial, so the URL stays the page's state), and one error policy: a failed query is an explicit
error state with status 503 and Retry-After, never an empty page that would read as "no data".
Nothing of the exception is shown (its text may name hosts, users or SQL); it goes to the log."""

import logging

from django.shortcuts import render

logger = logging.getLogger("hud.views")
RETRY_AFTER_SECONDS = 60


def page(request, template: str, context: dict, status: int = 200, partial: str | None = "region"):
    """The full page, or only its `partial` for htmx's refresh (HX-Request). A template that is
    itself a fragment (a tooltip) has no partial."""
    name = f"{template}#{partial}" if partial and request.headers.get("HX-Request") else template
    response = render(request, name, context, status=status)
    response["Vary"] = "HX-Request"
    return response


def unavailable(request, template: str, context: dict, exc: Exception, partial: str | None = "region"):
    """The database did not answer: say so, with 503, and ask the client to come back."""
    logger.warning("HUD page %s: database error: %s", request.path, exc, exc_info=True)
    context = {**context, "error": unavailable_text(exc)}
    response = page(request, template, context, status=503, partial=partial)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def unavailable_text(exc: Exception) -> str:
    return (
        "The database did not answer, so this could not be loaded. "
        f"This is an error, not an empty result; the page retries every {RETRY_AFTER_SECONDS} s."
    )
