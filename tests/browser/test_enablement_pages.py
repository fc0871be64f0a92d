"""The enablement pages on a 390 px phone: every link a tap target of at least 24 px, the matrix
scrolling inside its own box with the backend column held in place, the reference's row first,
a path's modules a tap away; and the backend page drawing its plot."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
SMALL_TARGETS = """(selector) => [...document.querySelectorAll(selector)]
  .filter((a) => { const r = a.getBoundingClientRect(); return r.width > 0 && (r.height < 24 || r.width < 24); })
  .slice(0, 5).map((a) => a.textContent.trim() + " " + Math.round(a.getBoundingClientRect().height))"""


def phone_page(browser, url: str):
    context = browser.new_context(viewport=PHONE)
    context.set_default_timeout(15_000)
    page = context.new_page()
    page.goto(url)
    page.wait_for_load_state("load")
    return context, page


def test_the_table_taps_through_to_a_paths_modules_on_a_phone(browser, live_server, hud_store):
    context, page = phone_page(browser, live_server.url + "/crcr/enablement")
    try:
        rows = page.locator("tbody tr").evaluate_all("(rows) => rows.map((r) => r.dataset.backend)")
        assert rows[0] == "pytorch/openreg-ci"
        assert page.evaluate(SMALL_TARGETS, ".enable-table a") == []
        assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
        page.locator('tr[data-backend="intel/torch-xpu-ops"] td[data-path="nn"] a').click()
        page.wait_for_url("**/crcr/enablement/intel/torch-xpu-ops?path=nn")
        modules = page.locator("tbody tr").evaluate_all("(rows) => rows.map((r) => r.dataset.module)")
        assert modules and set(modules) <= {"test_nn", "nn.test_convolution"}
        assert page.evaluate(SMALL_TARGETS, ".path-nav a, .enable-table a, .candidates a") == []
    finally:
        context.close()


def test_the_backend_page_draws_enabled_tests_per_path(browser, live_server, hud_store):
    context, page = phone_page(browser, live_server.url + "/crcr/intel/torch-xpu-ops")
    try:
        page.wait_for_selector("#chart-enabled[data-drawn]")
    finally:
        context.close()
