"""Pages show invisible characters as visible code points.

Names, messages and titles come from downstream CI and webhooks; Django escapes their markup,
but a bidi override or an ESC is not markup: it would reach the browser as is and reorder or
hide the text around it (`test\u202egnp.exe`). Every HTML answer (HUD, operator pages, admin) has
each such character (relay.inputs.text) replaced by `⟨U+202E⟩`, whichever template or field it came
through. Our own templates contain none, so a page without odd data is passed through untouched."""

import re

from relay.inputs.text import CONTROLS_BUT_LAYOUT, visible

_INVISIBLE = re.compile(f"[{CONTROLS_BUT_LAYOUT}]")


class VisibleControlsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.streaming or not response.get("Content-Type", "").startswith("text/html"):
            return response
        text = response.content.decode(response.charset or "utf-8", errors="replace")
        if _INVISIBLE.search(text):
            response.content = _INVISIBLE.sub(lambda m: visible(m.group()), text).encode(response.charset or "utf-8")
            if response.has_header("Content-Length"):
                response["Content-Length"] = str(len(response.content))
        return response
