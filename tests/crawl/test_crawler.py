"""The crawler finds what it is there to find: a small site with one page of each fault (a 500, a
console error, a page too wide for a phone, an upstream-broken banner the baseline API denies, a
gate box /gate contradicts, a gate box its own verdict table contradicts, a tooltip naming another
culprit than /api/v1/culprits, a since-which-commit line naming another culprit than
/api/v1/bisections) and clean pages beside them."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.crawl.crawler import crawl

pytestmark = pytest.mark.browser
SHA, GOOD = "a" * 40, "b" * 40
PAGE = "<!doctype html><html><head><meta name='viewport' content='width=device-width'></head><body>{}</body></html>"
SITE = {
    "/": PAGE.format(
        f'<a href="/commit/{SHA}">bad banner</a> <a href="/commit/{GOOD}">good</a> <a href="/pr/7">pr</a> <a href="/pr/8">pr 8</a>'
        ' <a href="/wide">wide</a> <a href="/noisy">noisy</a> <a href="/broken">broken</a> <a href="/clipped">clipped</a>'
        ' <a href="/crcr/intel/torch-xpu-ops">backend</a>'
        ' <a href="https://github.com/elsewhere">outside</a>'
        f'<table><tr data-sha="{SHA}"><td class="c s-failure" data-p="3">X</td></tr></table>'
    ),
    f"/commit/{SHA}": PAGE.format('<div class="broken-banner" data-upstream-broken="true">Upstream broken</div>'),
    f"/commit/{GOOD}": PAGE.format("<p>nothing broken</p>"),
    "/pr/7": PAGE.format(
        '<section class="gate gate-success" id="gate" data-gate-state="success">'
        '<ul><li data-repo="intel/torch-xpu-ops" data-gate-state="success">ok</li></ul></section>'
    ),
    "/pr/8": PAGE.format(
        '<section class="gate gate-failure" id="gate" data-gate-state="failure">'
        '<ul><li data-repo="intel/torch-xpu-ops" data-gate-state="failure">blocked</li></ul></section>'
        '<table><tr class="verdict-row" data-repo="intel/torch-xpu-ops" data-level="L4" data-blocks="false">'
        "<td>1 already failing on trunk: not this PR</td></tr></table>"
    ),
    "/wide": PAGE.format('<div style="width: 1200px">a table too wide for a phone</div>'),
    "/clipped": PAGE.format(
        '<div class="table-wrap" style="overflow-x: auto; max-width: 600px"><table style="width: 900px">'
        "<tr><th>Status</th><th>Last result</th></tr></table></div>"
    ),
    "/noisy": PAGE.format("<script>console.error('boom')</script>"),
    "/crcr/intel/torch-xpu-ops": PAGE.format(
        # the range answered beside a verified culprit: wrong
        f'<ul><li class="streak" data-kind="test" data-subject="test_a" data-first-failing="{SHA}" data-since="{SHA}"'
        ' data-since-answer="range"><span class="bisected" data-bisection="5" data-state="verified">X</span></li>'
        # the culprit answered, as the API has it: right
        f'<li class="streak" data-kind="test" data-subject="test_b" data-first-failing="{SHA}" data-since="{GOOD}"'
        ' data-since-answer="culprit"><span class="bisected" data-bisection="6" data-state="verified">Y</span></li>'
        # a culprit answered though its bisection did not reproduce: wrong
        f'<li class="streak" data-kind="test" data-subject="test_c" data-first-failing="{SHA}" data-since="{GOOD}"'
        ' data-since-answer="culprit"><span class="bisected" data-bisection="7" data-state="not_reproducible">Z</span>'
        "</li></ul>"
    ),
}
API = {
    f"/api/v1/commits/{SHA}/baseline": {"upstream_broken": False},
    f"/api/v1/commits/{GOOD}/baseline": {"upstream_broken": False},
    "/api/v1/prs/7/gate": {"state": "failure", "backends": [{"repo": "intel/torch-xpu-ops", "state": "failure"}]},
    "/api/v1/prs/8/gate": {"state": "failure", "backends": [{"repo": "intel/torch-xpu-ops", "state": "failure"}]},
    "/api/v1/culprits": {"streaks": [{"subject": "ci / test", "first_failing": GOOD}]},
    **{
        f"/api/v1/bisections/{pk}": {"id": pk, "state": state, "result": {"culprit_sha": culprit}}
        for pk, state, culprit in ((5, "verified", GOOD), (6, "verified", GOOD), (7, "not_reproducible", None))
    },
}
TOOLTIP = (
    '<div class="tip-head"><a href="/crcr/intel/torch-xpu-ops">XPU</a></div>'
    f'<li class="streak" data-kind="job" data-subject="ci / test" data-first-failing="{SHA}">'
)


class Site(BaseHTTPRequestHandler):
    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path == "/broken":
            return self.answer(500, "text/html", "oops")
        if path == "/" and query.startswith("tip="):
            return self.answer(200, "text/html", TOOLTIP)
        if path in API:
            return self.answer(200, "application/json", json.dumps(API[path]))
        if path in SITE:
            return self.answer(200, "text/html; charset=utf-8", SITE[path])
        self.answer(404, "text/html", "not here")

    def answer(self, status, kind, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Site)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_crawler_reports_each_fault_and_nothing_on_the_clean_pages(site, browser):
    problems = "\n".join(crawl(site, browser, ["/"]).problems)
    assert "/broken: HTTP 500" in problems
    assert "/noisy (desktop): console error: boom" in problems
    assert "/wide (phone): scrolls sideways" in problems and "/wide (desktop)" not in problems
    assert "/clipped (desktop): a table (Status, …) is cut off" in problems
    assert f"/commit/{SHA}: the banner says upstream broken=True" in problems
    assert "/pr/7: the gate box shows ('success'" in problems
    assert "/pr/8: the verdict table says intel/torch-xpu-ops does not block, the gate box says failure" in problems
    assert "/pr/8: the gate box shows" not in problems and "/pr/7: the verdict table" not in problems
    assert f"tooltip {SHA[:10]}.3: since which commit" in problems
    assert f"since which commit for test_a: answers {SHA} (range), the verified culprit is {GOOD}" in problems
    assert "since which commit for test_c: answers" in problems and "test_b" not in problems
    assert GOOD + ":" not in problems and "github.com" not in problems
