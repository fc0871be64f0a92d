"""A relay-health card's details in Debian Chromium: the dialog opens on /crcr with the card's
fragment, fits a 390 px phone, closes; with JavaScript off the same link is a page of its own."""

from datetime import timedelta

import pytest
from django.utils import timezone

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PHONE = {"width": 390, "height": 844}


@pytest.fixture
def probe_runs(transactional_db):
    from django.core.cache import cache

    from relay.models import JobRun, Project

    cache.clear()
    probe = Project.objects.create(
        full_name="pytorch/crcr-test", level="L4", is_health_probe=True, hardware_kind="probe", github_repo_id=9
    )
    at = timezone.now() - timedelta(minutes=20)
    for run_id, outcomes in (("501", {"smoke": "success", "xfail": "failure"}), ("502", {"smoke": "failure"})):
        for name, conclusion in outcomes.items():
            JobRun.objects.create(
                project=probe,
                delivery_key=f"d{run_id}",
                event_type="pull_request",
                run_id=run_id,
                job_name=name,
                workflow_name="crcr",
                status="completed",
                conclusion=conclusion,
                head_sha=run_id * 8 + "a" * 16,
                pr_number=170002,
                check_run_id=f"77{run_id}",
                workflow_url=f"https://github.com/pytorch/crcr-test/actions/runs/{run_id}",
                created_at=at,
                completed_at=at,
            )
    return probe


def test_the_probe_cards_details_open_in_a_dialog_that_fits_a_phone(browser, live_server, probe_runs, screenshots):
    context = browser.new_context(viewport=PHONE)
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        page.goto(live_server.url + "/crcr")
        page.locator('[data-card="probe"] [data-health-dialog]').click()
        dialog = page.locator("#health-dialog")
        dialog.locator(".health-details").wait_for()
        assert dialog.is_visible() and page.url.endswith("/crcr")
        text = dialog.inner_text()
        assert "Relay health probe" in text and "2/2 jobs passed" in text and "0/1 jobs passed" in text
        assert "pytorch/crcr-test crcr / smoke: failure" in text
        box = dialog.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
        assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
        page.screenshot(path=str(screenshots / "health-dialog-phone.png"))
        dialog.locator("button", has_text="Close").click()
        assert not dialog.is_visible()
    finally:
        context.close()


def test_without_javascript_the_details_link_opens_the_details_page(browser, live_server, probe_runs):
    context = browser.new_context(viewport=PHONE, java_script_enabled=False)
    context.set_default_timeout(15_000)
    page = context.new_page()
    try:
        page.goto(live_server.url + "/crcr")
        page.locator('[data-card="probe"] [data-health-dialog]').click()
        page.wait_for_url("**/crcr/health/probe")
        assert "2/2 jobs passed" in page.inner_text("main")
    finally:
        context.close()
