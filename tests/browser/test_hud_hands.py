"""The HUD's mouse and keyboard conventions in Debian Chromium: hover shows a cell's details,
double-click opens its job's log, column and row highlights (kept in the URL), the skip link,
the remembered legend, the top bar's search box, the commit page's collapsed sections, and the
grid on a phone."""

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def failing_cell(page):
    return page.locator("#hud-grid td.c.s-failure:not(.j)").first


def test_hovering_a_cell_shows_its_details_instead_of_the_browser_title(page, live_server, hud_store):
    page.goto(live_server.url + "/")
    cell = failing_cell(page)
    cell.hover()
    tip = page.locator("#hud-tip.hover")
    tip.locator(".tip-jobs, .tip-error").first.wait_for()
    assert "Commit page" in tip.inner_text() and cell.get_attribute("title") is None and "cell=" not in page.url
    page.mouse.move(2, 2)
    page.wait_for_selector("#hud-tip", state="hidden")


def test_double_clicking_a_cell_opens_its_jobs_log(page, live_server, hud_store):
    page.context.route(
        re.compile(r"https://github\.com/.*"),
        lambda route: route.fulfill(status=200, body="the job log", content_type="text/plain"),
    )
    page.goto(live_server.url + "/")
    with page.expect_popup() as popup_info:
        failing_cell(page).dblclick()
    popup = popup_info.value
    popup.wait_for_url(re.compile(r"https://github\.com/[^/]+/[^/]+/actions/runs/\d+/job/\d+"))
    assert "the job log" in popup.content()


def test_clicking_a_column_header_highlights_the_column_and_the_caret_expands_it(page, live_server, hud_store):
    page.goto(live_server.url + "/")
    page.locator("#hud-grid th.col .col-name").nth(1).click()
    page.wait_for_url(re.compile(r"hl_col=\d+"))
    assert page.locator("#hud-grid th.col.col-hl").count() == 1 and page.locator("#hud-grid td.c.col-hl").count() == 30
    assert page.locator("#hud-grid th.col .col-name").nth(1).get_attribute("aria-pressed") == "true"
    page.reload()
    assert page.locator("#hud-grid td.c.col-hl").count() == 30, "the highlight is in the URL"
    page.locator("#hud-grid th.col .col-name").nth(1).click()
    assert page.locator("#hud-grid td.c.col-hl").count() == 0 and "hl_col" not in page.url
    page.locator("#hud-grid th.col .expand-link").nth(1).click()
    page.wait_for_url(re.compile(r"expand=intel"))
    assert page.locator("#hud-grid th.col.job").count() >= 2


def test_clicking_a_rows_time_highlights_the_row(page, live_server, hud_store):
    page.goto(live_server.url + "/")
    page.locator("#hud-grid tbody tr").nth(2).locator("td.t").click()
    page.wait_for_url(re.compile(r"hl_row=[0-9a-f]{12}"))
    assert page.locator("#hud-grid tr.row-hl").count() == 1
    assert page.locator("#hud-grid tr.row-hl").get_attribute("data-sha") == hud_store["commits"][2].sha
    page.locator("#hud-grid tbody tr").nth(2).locator("td.t").click()
    assert page.locator("#hud-grid tr.row-hl").count() == 0


def test_the_keyboard_reaches_the_grid_in_one_tab_and_highlights_with_r_and_c(page, live_server, hud_store):
    page.goto(live_server.url + "/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.className") == "skip-link"
    assert (
        page.locator(".skip-link").inner_text() == "Skip to the grid"
        and page.locator(".skip-link").bounding_box()["y"] >= 0
    )
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.matches('#hud-grid td.c')")
    page.keyboard.press("ArrowDown")
    page.keyboard.press("r")
    page.keyboard.press("c")
    assert page.locator("#hud-grid tr.row-hl").count() == 1 and page.locator("#hud-grid td.c.col-hl").count() == 30
    assert page.evaluate("document.activeElement.closest('tr').classList.contains('row-hl')")


def test_the_legend_opens_the_first_time_then_stays_as_the_reader_left_it(page, live_server, hud_store):
    page.goto(live_server.url + "/")
    assert page.locator(".hud-legend").evaluate("el => el.open")
    page.reload()
    assert not page.locator(".hud-legend").evaluate("el => el.open"), "collapsed once seen"
    page.locator(".hud-legend summary").click()
    page.reload()
    assert page.locator(".hud-legend").evaluate("el => el.open"), "opened by the reader, so kept open"


def test_the_legend_starts_collapsed_on_a_phone(browser, live_server, hud_store):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    phone = context.new_page()
    phone.goto(live_server.url + "/")
    assert not phone.locator(".hud-legend").evaluate("el => el.open")
    context.close()


@pytest.mark.parametrize(
    "typed, lands_on",
    [
        ("151999", r"/pr/151999$"),
        ("#151999", r"/pr/151999$"),
        ("sha", r"/commit/[0-9a-f]{40}$"),
        ("intel/torch-xpu-ops", r"/crcr/intel/torch-xpu-ops$"),
        ("Intel XPU", r"/crcr/intel/torch-xpu-ops$"),
    ],
)
def test_the_search_box_goes_to_a_pr_a_commit_or_a_backend(page, live_server, hud_store, typed, lands_on):
    page.goto(live_server.url + "/crcr")
    page.fill("#top-search-q", hud_store["shared"][:9] if typed == "sha" else typed)
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(lands_on))
    if typed == "sha":
        assert page.url.endswith(hud_store["shared"])


def test_the_search_box_says_when_nothing_matches(page, live_server, hud_store):
    page.goto(live_server.url + "/")
    page.fill("#top-search-q", "no-such-thing")
    with page.expect_response(re.compile(r"/search\?q=no-such-thing")) as answer:
        page.keyboard.press("Enter")
    assert answer.value.status == 404
    assert "Nothing matches no-such-thing" in page.locator("h1").inner_text()
    assert page.input_value("#top-search-q") == "no-such-thing"


def test_the_commit_pages_backend_sections_start_collapsed_and_remember_what_was_opened(page, live_server, hud_store):
    url = f"{live_server.url}/commit/{hud_store['shared']}"
    page.goto(url)
    boxes = page.locator("details.backend-box")
    assert boxes.count() > 5 and page.locator("details.backend-box[open]").count() == 0
    boxes.nth(1).locator(":scope > summary").click()
    backend = boxes.nth(1).get_attribute("data-backend")
    page.wait_for_url(re.compile(rf"open={backend}$"))
    assert boxes.nth(1).locator("table.jobs").is_visible()
    page.reload()
    assert page.locator("details.backend-box[open]").count() == 1
    page.goto(f"{url}#backend-{boxes.nth(3).get_attribute('data-backend')}")
    page.wait_for_function("document.querySelector('details.backend-box:target').open")


def test_on_a_phone_the_grids_glyphs_are_in_the_first_screen_and_the_commit_stays_while_cells_scroll(
    browser, live_server, hud_store, screenshots
):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    phone = context.new_page()
    phone.goto(live_server.url + "/")
    first = phone.locator("#hud-grid td.c").first.bounding_box()
    assert first["y"] + first["height"] <= 844 and first["x"] + first["width"] <= 390
    phone.locator(".grid-scroll").evaluate("box => { box.scrollLeft = 400; }")
    title = phone.locator("#hud-grid tbody tr").first.locator("td.title").bounding_box()
    sha = phone.locator("#hud-grid tbody tr").first.locator("td.sha").bounding_box()
    assert 0 <= sha["x"] < title["x"] < 390, "SHA and title stay at the left edge"
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390
    phone.screenshot(path=str(screenshots / "grid-phone-scrolled-sideways.png"))
    context.close()


def test_the_grid_and_the_backend_matrix_draw_glyphs_alike(page, live_server, hud_store):
    style = "el => { const s = getComputedStyle(el); return [s.color, s.fontFamily, s.fontWeight, s.backgroundColor]; }"
    page.goto(live_server.url + "/")
    grid = failing_cell(page).evaluate(style)
    page.goto(live_server.url + "/crcr/intel/torch-xpu-ops?range=7d")
    matrix = page.locator("table.matrix a.g.s-failure").first.evaluate(style)
    assert grid[:3] == matrix[:3] and matrix[3] == grid[3]


def test_every_page_has_a_favicon(page, live_server, hud_store):
    page.goto(live_server.url + "/crcr")
    href = page.locator("link[rel=icon]").get_attribute("href")
    response = page.request.get(live_server.url + href)
    assert response.status == 200 and "svg" in response.headers["content-type"]


def test_on_the_pr_page_names_lead_to_dashboards_and_c_highlights_the_column(page, live_server, hud_store):
    page.goto(f"{live_server.url}/pr/{hud_store['pr_number']}")
    page.locator("#hud-grid tbody tr").first.locator("td.c").nth(2).click()
    page.keyboard.press("Escape")
    page.locator("#hud-grid tbody tr").first.locator("td.c").nth(2).focus()
    page.keyboard.press("c")
    page.wait_for_url(re.compile(r"hl_col=i2"))
    assert page.locator("#hud-grid td.c.col-hl").count() == 3
    page.locator("#hud-grid th.col .rot > a").nth(1).click()
    page.wait_for_url(re.compile(r"/crcr/intel/torch-xpu-ops"))
