"""The grid, commit and PR pages in Debian Chromium: load, pin, filter, follow, screenshot."""

import re

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_grid_loads_with_its_legend_and_is_screenshotted(page, live_server, hud_store, screenshots):
    page.goto(live_server.url + "/")
    page.wait_for_selector("#hud-grid td.c")
    assert page.locator("#hud-grid tbody tr").count() == 30
    assert page.locator(".hud-legend").is_visible()
    broken = {hud_store["upstream_broken"], hud_store["shared"]}  # the reference's build, then its tests, failed
    assert {row.get_attribute("data-sha") for row in page.locator("tr.broken").all()} == broken
    page.screenshot(path=str(screenshots / "grid.png"))


def test_the_grid_refreshes_in_place_and_a_failed_refresh_says_so(page, live_server, hud_store):
    page.goto(live_server.url + "/?name=xpu")
    refresh = "htmx.ajax('GET', document.getElementById('grid-region').getAttribute('hx-get'), {target: '#grid-region', swap: 'innerHTML'})"
    page.evaluate(refresh)
    page.wait_for_selector("#refresh-state .refresh-note:not(.failed)")
    assert page.locator("#hud-grid thead th.col").count() == 2
    page.route(re.compile(r".*/\?name=xpu$"), lambda route: route.fulfill(status=503, body="database unavailable"))
    page.evaluate(refresh)
    page.wait_for_selector("#refresh-state .refresh-note.failed")
    assert "Refresh failed (HTTP 503)" in page.inner_text("#refresh-state")
    assert page.locator("#hud-grid tbody tr").count() == 30, "the data loaded before stays"


def test_a_clicked_cell_pins_its_details_arrows_move_and_escape_clears(page, live_server, hud_store):
    page.goto(live_server.url + "/")
    cell = page.locator("#hud-grid td.c.s-failure").first
    cell.click()
    tip = page.locator("#hud-tip")
    tip.locator(".tip-jobs, .tip-error").first.wait_for()
    assert "Commit page" in tip.inner_text() and "cell=" in page.url
    page.keyboard.press("ArrowDown")
    page.wait_for_function("document.querySelectorAll('#hud-grid td.c.pinned').length === 1")
    assert page.evaluate("document.activeElement.classList.contains('pinned')")
    page.keyboard.press("Escape")
    assert tip.is_hidden() and "cell=" not in page.url and page.locator("td.c.pinned").count() == 0


def test_a_name_filter_narrows_the_columns_and_lands_in_the_url(page, live_server, hud_store):
    page.goto(live_server.url + "/")
    before = page.locator("#hud-grid thead th.col").count()
    page.fill("input[name=name]", "xpu")
    page.click("#grid-filters button[type=submit]")
    page.wait_for_url(re.compile(r"name=xpu"))
    assert page.locator("#hud-grid thead th.col").count() == 2 < before
    page.fill("input[name=name]", "(broken")
    page.check("input[name=regex]")
    page.click("#grid-filters button[type=submit]")
    assert "Invalid regular expression" in page.locator(".filter-error").inner_text()


def test_following_a_commit_link_opens_the_commit_page(page, live_server, hud_store, screenshots):
    page.goto(live_server.url + "/")
    page.locator(f'tr[data-sha="{hud_store["shared"]}"] td.title a').click()
    page.wait_for_url(re.compile("/commit/" + hud_store["shared"]))
    assert page.locator("#baseline").is_visible() and "Shared with reference" in page.content()
    page.screenshot(path=str(screenshots / "commit.png"), full_page=True)


def test_the_pr_page_shows_one_row_per_head_and_the_gate(page, live_server, hud_store, screenshots):
    page.goto(f"{live_server.url}/pr/{hud_store['pr_number']}")
    page.wait_for_selector("#hud-grid td.c")
    assert page.locator("#hud-grid tbody tr").count() == 3
    assert "backends passed" in page.locator("#pr-summary").inner_text()
    assert "crcr/gate" in page.locator("#gate").inner_text()
    page.screenshot(path=str(screenshots / "pr.png"), full_page=True)


def test_a_triage_verdict_shows_as_advice_in_the_pinned_tooltip_and_on_the_commit_page_of_a_phone(
    browser, live_server, hud_store, screenshots
):
    from relay.callbacks.triage_verdict import triage_verdict_read
    from relay.models import JobRun

    sha = hud_store["shared"]
    job = JobRun.objects.filter(head_sha=sha, conclusion="failure", project__is_reference=False).first()
    number = int(hud_store["commits"][7].title.rsplit("#", 1)[1].rstrip(")"))
    raw = {
        "schema_version": 1,
        "category": "upstream",
        "confidence": "high",
        "summary": "fails on the OpenReg reference too " + "x" * 300,
        "suspected_upstream": {"pr": number, "reason": "landed this commit"},
        "evidence": [
            {"test": "test_binary_ufuncs.TestBinaryUfuncs.test_add_" + "y" * 120, "log_url": "https://l.example/1"}
        ],
        "analyzer": {"name": "triage-bot"},
    }
    JobRun.objects.filter(pk=job.pk).update(triage_verdict=triage_verdict_read(raw)[0])
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(f"{live_server.url}/commit/{sha}?open=all")
    advice = page.locator(".advice").first
    assert "Upstream · high confidence · advisory" in advice.inner_text()
    assert f"#{number} (this PR)" in advice.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    page.goto(f"{live_server.url}/")
    page.locator(f'#hud-grid tr[data-sha="{sha}"] td.c[data-p="{job.project_id}"]').click()
    tip = page.locator("#hud-tip .advice")
    tip.wait_for()
    assert "advisory" in tip.inner_text() and f"#{number} (this PR)" in tip.inner_text()
    page.locator("#hud-tip").screenshot(path=str(screenshots / "tooltip-advice-phone.png"))
    context.close()


def test_a_cell_failing_on_one_variant_alone_says_which_in_its_mark_and_pinned_tooltip_on_a_phone(
    browser, live_server, screenshots
):
    from django.utils import timezone

    from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

    rocm = ProjectFactory(full_name="ROCm/pytorch", display_name="AMD ROCm", level="L2", variant_keys=["device"])
    commit = UpstreamCommitFactory(sha="e" * 40, is_trunk=True, landed_at=timezone.now())
    jobs = {
        device: JobRunFactory(
            project=rocm,
            head_sha=commit.sha,
            job_name=f"test (default, 1, 1, {device})",
            conclusion=conclusion,
            environment={"device": device},
        )
        for device, conclusion in (("MI300", "failure"), ("MI250", "success"))
    }
    FailedTestFactory(job_run=jobs["MI300"], name="test_svd_cuda_float64")
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(f"{live_server.url}/")
    cell = page.locator(f'#hud-grid tr[data-sha="{commit.sha}"] td.c[data-p="{rocm.id}"]')
    assert "fails on MI300 only" in cell.get_attribute("title") and cell.locator("i.vo").inner_text() == "¹"
    cell.click()
    state = page.locator("#hud-tip .tip-state")
    state.wait_for()
    assert "fails on MI300 only" in state.inner_text()
    box = page.locator("#hud-tip").bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    page.locator("#hud-tip").screenshot(path=str(screenshots / "tooltip-variant-only-phone.png"))
    context.close()
