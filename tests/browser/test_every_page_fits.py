"""Every page at a 390 px phone and a 1600 px desktop, in the light and the dark theme: no
sideways page scroll on the phone, and a screenshot of each in var/screenshots/ to look at."""

from urllib.parse import quote

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1600, "height": 1000}
VIEWS = [("phone", PHONE), ("desktop", DESKTOP)]
THEMES = ("light", "dark")


def pages(store) -> dict[str, str]:
    return {
        "grid": "/",
        "commit": f"/commit/{store['shared']}",
        "pr": f"/pr/{store['pr_number']}",
        "summary": "/crcr",
        "health-details": "/crcr/health/callbacks",
        "backend": "/crcr/intel/torch-xpu-ops",
        "metrics": "/crcr/metrics?range=24h",
        "enablement": "/crcr/enablement",
        "enablement-backend": "/crcr/enablement/intel/torch-xpu-ops",
        "deliveries": "/relay/deliveries",
        "search-not-found": "/search?q=no-such-backend",
        "test": "/test/" + quote(store.get("test_id", ""), safe=""),
        "admin-login": "/admin/login/",
        "admin": "/admin/",
    }


@pytest.fixture
def admin_account(transactional_db):
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_superuser("admin", "admin@example.invalid", "sandbox-pass-390")
    return "admin", "sandbox-pass-390"


def open_page(browser, url: str, viewport: dict, theme: str, login=None):
    context = browser.new_context(viewport=viewport, color_scheme=theme)
    context.set_default_timeout(15_000)
    page = context.new_page()
    if login:
        page.goto("/".join(url.split("/")[:3]) + "/admin/login/")
        page.fill("#id_username", login[0])
        page.fill("#id_password", login[1])
        page.click("input[type=submit]")
        page.wait_for_url("**/admin/")
    page.goto(url)
    page.wait_for_load_state("load")
    if "/metrics" in url:
        page.wait_for_selector(".chart[data-drawn]")
    return context, page


def sideways_overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


WIDE_ELEMENTS = """() => {
  const limit = document.documentElement.clientWidth;
  const clipped = (el) => { for (let p = el.parentElement; p; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX; if (o === "auto" || o === "scroll" || o === "hidden") return true; } return false; };
  return [...document.querySelectorAll("body *")].filter((el) => el.getBoundingClientRect().right > limit && !clipped(el))
    .slice(0, 5).map((el) => el.tagName.toLowerCase() + "." + [...el.classList].join(".") + " right=" + Math.round(el.getBoundingClientRect().right));
}"""


@pytest.mark.parametrize("name", list(pages({"shared": "", "pr_number": 0, "test_id": ""})))
def test_the_page_fits_a_phone_and_is_screenshotted_in_both_themes(
    name, browser, live_server, hud_store, admin_account, screenshots
):
    url = live_server.url + pages(hud_store)[name]
    overflow = {}
    for view, viewport in VIEWS:
        for theme in THEMES:
            context, page = open_page(
                browser, url, viewport, theme, login=admin_account if name in ("admin", "deliveries") else None
            )
            try:
                page.screenshot(path=str(screenshots / f"{name}-{view}-{theme}.png"), full_page=True)
                if view == "phone":
                    page.screenshot(path=str(screenshots / f"{name}-{view}-{theme}-first-screen.png"))
                overflow[view, theme] = sideways_overflow(page)
                if view == "phone" and overflow[view, theme] > 0:
                    overflow["too wide", theme] = page.evaluate(WIDE_ELEMENTS)
            finally:
                context.close()
    assert overflow["phone", "light"] <= 0 and overflow["phone", "dark"] <= 0, (
        f"{name} scrolls sideways at 390 px by {overflow} px"
    )
