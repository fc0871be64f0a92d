"""The plain L4 probe's failure on the HUD's PR page, in Debian Chromium: the gate box says the
merge is blocked by pytorch/crcr-test and names the failing L4 jobs (a screenshot is saved)."""

import os
from pathlib import Path

import pytest

from .test_probe_l4 import PLAIN_PR, PROBE, run

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"


@pytest.fixture
def probe(relay):
    return relay.backend(PROBE, "L4", is_health_probe=True, hardware_kind="probe")


def test_the_plain_l4_probes_failure_blocks_the_gate_on_the_pr_page(relay, probe, browser, live_server):
    from django.core.cache import cache

    cache.clear()
    run(relay, probe, PLAIN_PR)
    relay.drain()
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/pr/{PLAIN_PR}", timeout=15_000)
        gate = page.locator("#gate")
        gate.wait_for(timeout=15_000)
        text = gate.inner_text()
        assert "crcr/gate: failure" in text and f"Blocked: {PROBE} failed" in text
        assert "test-L4-failure" in text and "test-L4-cancel" in text
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "pr-l4-probe-blocked.png"), full_page=True)
    finally:
        context.close()
