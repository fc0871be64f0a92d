"""The summary, backend and metrics pages in Debian's Chromium (fixtures `browser` and
`screenshots` from tests/browser/conftest.py: skipped without /usr/bin/chromium unless
CRCR_REQUIRE_BROWSER=1)."""

import os
from datetime import timedelta

import pytest
from django.utils import timezone

from relay.models import FailedTest, UpstreamCommit
from tests.hud.test_selectors_summary import job, project  # noqa: F401  (fixtures)

os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("fresh_tallies")]


@pytest.fixture
def backends():
    """Two backends with a few days of PR results: one failing job with failed tests."""
    xpu, npu = (
        project("intel/torch-xpu-ops", level="L4", display_name="Intel XPU"),
        project("ascend/pytorch", level="L2"),
    )
    now = timezone.now()
    for day in range(4):
        sha = f"{day:x}" * 40
        UpstreamCommit.objects.create(sha=sha, title=f"Speed up kernel {day}", pr_number=100 + day)
        for backend in (xpu, npu):
            for name in ("build", "test-1", "test-2", "test-3"):
                failing = backend is npu and day == 0 and name == "test-2"
                ran = job(
                    backend,
                    "failure" if failing else "success",
                    sha=sha,
                    name=name,
                    pr_number=100 + day,
                    at=now - timedelta(days=day, hours=1),
                    workflow_url=f"https://github.com/{backend.full_name}/actions/runs/{day}",
                )
                if failing:
                    FailedTest.objects.create(
                        job_run=ran, name="test_conv2d_float16", classname="TestConvNPU", message="mismatch"
                    )
    return xpu, npu


@pytest.fixture
def tab(browser):
    context = browser.new_context(viewport={"width": 1440, "height": 1000})
    context.set_default_timeout(10_000)
    yield context.new_page()
    context.close()


def test_it_loads_the_summary_and_switches_the_range(live_server, tab, backends, screenshots):
    tab.goto(f"{live_server.url}/crcr")
    assert tab.locator("table.backends a.repo", has_text="Intel XPU").is_visible()
    assert tab.locator("[data-card=probe] .state-word").inner_text().strip() == "No data"
    tab.get_by_role("link", name="Last 30 days").click()
    tab.wait_for_url("**/crcr?range=30d&event=pr")
    assert tab.locator(".segmented a[aria-current]").inner_text() == "Last 30 days"
    tab.screenshot(path=str(screenshots / "summary.png"), full_page=True)


def test_it_opens_a_backend_and_drills_into_a_failing_cell(live_server, tab, backends, screenshots):
    tab.goto(f"{live_server.url}/crcr")
    tab.locator("table.backends a.repo", has_text="ascend/pytorch").click()
    tab.wait_for_url("**/crcr/ascend/pytorch?**")
    failing = tab.locator("table.matrix a.g.s-failure").first
    failing.click()
    detail = tab.locator("#cell-detail")
    detail.get_by_text("test_conv2d_float16").wait_for()
    assert "cell=" in tab.url and "Speed up kernel 0" in detail.inner_text()
    tab.screenshot(path=str(screenshots / "backend.png"), full_page=True)


def test_it_draws_the_metrics_charts(live_server, tab, backends, screenshots):
    tab.goto(f"{live_server.url}/crcr/metrics?range=7d")
    tab.wait_for_selector("#chart-pass-rate[data-drawn] .main-svg")
    assert tab.locator(".chart[data-drawn]").count() == 5
    assert tab.locator(".chart-error").count() == 0
    tab.screenshot(path=str(screenshots / "metrics.png"), full_page=True)


def test_a_nightly_only_repo_shows_on_the_nightly_tab_with_one_row_per_sha(live_server, tab, screenshots):
    redhat = project("TorchedHat/pytorch-redhat-ci", display_name="Red Hat (nightly)", events=["nightly"])
    project("intel/torch-xpu-ops", level="L4", display_name="Intel XPU")
    sha, now = "3f1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a", timezone.now()
    UpstreamCommit.objects.create(sha=sha, title="Nightly head", is_trunk=True)
    for run_id, workflow, conclusion in (("5123", "ci", "failure"), ("5124", "ci-rocm", "success")):
        for name in ("Entrypoints Test (API Server): 🚀", 'Kernels "flash-attn: v3"'):
            job(
                redhat,
                conclusion,
                sha=sha,
                name=name,
                event_type="nightly",
                run_id=run_id,
                workflow_name=workflow,
                delivery_key=f"buildkite-{run_id}-{name}"[:100],
                at=now - timedelta(hours=2),
            )
    tab.goto(f"{live_server.url}/crcr")
    assert tab.locator("table.backends a.repo", has_text="Red Hat").count() == 0
    tab.get_by_role("link", name="Nightly").first.click()
    tab.wait_for_url("**event=nightly**")
    tab.locator("table.backends a.repo", has_text="Red Hat").click()
    tab.wait_for_url("**/crcr/TorchedHat/pytorch-redhat-ci?**")
    rows = tab.locator("table.matrix tbody tr")
    assert rows.count() == 1 and "2 runs · 2 wf" in rows.first.inner_text()
    tab.locator("table.matrix a.g.s-failure").first.click()
    tab.locator("#cell-detail").get_by_text("5123").first.wait_for()
    tab.screenshot(path=str(screenshots / "backend-nightly.png"), full_page=True)
