"""Each quality figure's trend is drawn on the backend page and /crcr with the vendored plotly.js,
and the charts fit a 390 px phone."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("width", [390, 1600])
def test_the_quality_charts_draw_on_the_backend_page_and_the_summary(
    browser, live_server, hud_store, width, screenshots
):
    context = browser.new_context(viewport={"width": width, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    for path in ("/crcr/intel/torch-xpu-ops", "/crcr"):
        page.goto(live_server.url + path)
        for key in ("coverage", "flaky_share", "time_to_recover"):
            page.wait_for_selector(f"#chart-quality-{key}[data-drawn]")
        assert page.locator("#quality .chart-error").count() == 0
        assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    page.locator("#quality").screenshot(path=str(screenshots / f"quality-charts-{width}.png"))
    context.close()
