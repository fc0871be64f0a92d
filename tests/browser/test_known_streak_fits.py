"""A known issue named on the since-which-commit list wraps on a phone: the verdict marks' nowrap
kept its words on one line, and every backend and commit page naming one scrolled sideways by up
to 106 px at 390 px (found by the crawl on the sandbox)."""

import pytest

from relay.models import KnownIssue, UpstreamCommit
from relay.teststore.store import store_sweep
from tests.relay.teststore.conftest import named, ran, world  # noqa: F401 - the fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_known_issue_on_the_since_list_wraps_at_390_px(browser, live_server, world):  # noqa: F811
    newest = UpstreamCommit.objects.create(sha="e" * 40, is_trunk=True, title="change (#160001)")
    ran(world["reference"], newest)
    ran(world["xpu"], newest, "failure", [named("XPU", "xpu")])
    store_sweep()
    KnownIssue.objects.create(
        title="aten::_linalg_eigvals missing on accelerators, tracked upstream",
        url="https://github.com/intel/torch-xpu-ops/issues/7",
        test_patterns=["*test_add*"],
    )
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    try:
        page.goto(live_server.url + "/crcr/intel/torch-xpu-ops")
        assert page.locator(".streak .vs.mk-known").count() >= 1, "the page names the known issue"
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
    finally:
        context.close()
