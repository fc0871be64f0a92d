"""The Content-Security-Policy in Debian's Chromium: every page works under it (htmx, the plotly
charts, Swagger UI, the admin) and the browser reports no violation; an injected inline script
would not run."""

import os

import pytest

from tests.browser.test_summary_pages import backends  # noqa: F401  (the fixture)

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_tallies")]


@pytest.fixture
def tab(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.violations = []
    page.on("console", lambda msg: page.violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    page.on("pageerror", lambda exc: page.violations.append(f"page error: {exc}"))
    yield page
    context.close()


def test_every_page_works_under_the_policy_without_a_violation(live_server, tab, backends, admin_user):  # noqa: F811
    tab.goto(f"{live_server.url}/crcr/metrics?range=7d")
    tab.wait_for_selector("#chart-pass-rate[data-drawn] .main-svg")
    assert tab.locator(".chart[data-drawn]").count() == 5 and tab.locator(".chart-error").count() == 0
    for path in ("/", "/crcr", "/crcr/intel/torch-xpu-ops", "/pr/100", "/healthz"):
        tab.goto(f"{live_server.url}{path}")
    tab.goto(f"{live_server.url}/api/docs/")
    tab.wait_for_selector(".swagger-ui .info .title")
    tab.goto(f"{live_server.url}/admin/login/?next=/relay/deliveries")
    tab.fill("#id_username", admin_user.username)
    tab.fill("#id_password", "password")
    tab.click("input[type=submit]")
    tab.wait_for_url("**/relay/deliveries")
    assert tab.violations == []


def test_an_injected_inline_script_does_not_run(live_server, tab):
    tab.goto(f"{live_server.url}/healthz")
    tab.goto(f"{live_server.url}/crcr")
    tab.evaluate(
        """() => { const s = document.createElement('script'); s.textContent = 'window.pwned = 1'; document.body.appendChild(s); }"""
    )
    assert tab.evaluate("() => window.pwned") is None
    assert any("Content Security Policy" in v for v in tab.violations)
