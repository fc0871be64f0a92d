"""The grid on a 390 px phone: every tap target at least 24 px each way (WCAG 2.2's minimum
target size), a pinned tooltip about as wide as the screen (not a column of one character a line),
and SHAs named at the project's one short length (relay.policy.links.short_sha), whole, not clipped."""

import pytest

from relay.policy.links import short_sha

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
SMALL_TARGETS = """() => {
  const targets = [...document.querySelectorAll("a, button, td.c, input, select, summary")];
  const shown = targets.filter((el) => { const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && getComputedStyle(el).visibility !== "hidden"; });
  const small = shown.filter((el) => { const r = el.getBoundingClientRect(); return r.width < 23.5 || r.height < 23.5; });
  return {count: shown.length, small: small.length, examples: small.slice(0, 6).map((el) => {
    const r = el.getBoundingClientRect();
    return el.tagName.toLowerCase() + "." + [...el.classList].join(".") + " " + Math.round(r.width) + "x" + Math.round(r.height); })};
}"""


@pytest.fixture
def phone(browser):
    context = browser.new_context(viewport=PHONE)
    context.set_default_timeout(15_000)
    yield context.new_page()
    context.close()


def test_every_tap_target_of_the_grid_is_at_least_24_px_on_a_phone(phone, live_server, hud_store):
    phone.goto(live_server.url + "/")
    found = phone.evaluate(SMALL_TARGETS)
    assert found["count"] > 100 and found["small"] == 0, found


def test_a_tooltip_keeps_its_job_names_readable_on_a_phone(phone, live_server, hud_store, screenshots):
    """Job names as Buildkite and PyTorch's CI write them, long and beside six other columns:
    the name may break anywhere, so the table squeezed its column to one character a line
    (a tooltip 1,347 px tall)."""
    from relay.models import JobRun

    failing = JobRun.objects.filter(conclusion="failure").order_by("id").first()
    for n in range(4):
        JobRun.objects.create(
            project=failing.project,
            delivery_key=f"long-{n}",
            event_type=failing.event_type,
            run_id=f"9{n}",
            run_attempt=2,
            workflow_name="linux-jammy-py3.10-gcc11-sm86-periodic-dynamo-benchmarks",
            job_name=f"test (inductor_torchbench_perf_smoketest, {n + 1}, 4, linux.gcp.a100.large)",
            status="completed",
            conclusion="success",
            head_sha=failing.head_sha,
            tests_total=12345,
            tests_failed=None,
        )
    phone.goto(live_server.url + "/")
    cell = phone.locator(f'#hud-grid tr[data-sha="{failing.head_sha}"] td.c[data-p="{failing.project_id}"]')
    cell.evaluate("(td) => td.click()")  # a tap: no hover tooltip racing the click over the cell
    tip = phone.locator("#hud-tip")
    phone.locator("#hud-tip.pinned:not(.loading) .tip-jobs").wait_for()
    box = tip.bounding_box()
    names = tip.evaluate(
        """(box) => [...box.querySelectorAll(".tip-jobs td.job")].map((td) => {
             const r = td.getBoundingClientRect(); return {width: r.width, height: r.height}; })"""
    )
    phone.locator("#hud-tip").screenshot(path=str(screenshots / "tooltip-phone-long-jobs.png"))
    assert box["width"] >= 300 and box["x"] + box["width"] <= 390, box
    assert all(name["width"] >= 300 and name["height"] < 80 for name in names), names  # four lines at most


def test_the_grid_names_each_commit_by_the_one_short_sha_whole(phone, live_server, hud_store):
    phone.goto(live_server.url + "/")
    link = phone.locator("#hud-grid td.fixed.sha a").first
    sha = link.get_attribute("title").split()[0]
    assert link.inner_text() == short_sha(sha) and len(short_sha(sha)) >= 7
    clipped = phone.evaluate(
        """() => [...document.querySelectorAll("#hud-grid td.fixed.sha")].filter(
             (td) => td.scrollWidth > td.clientWidth + 1).length"""
    )
    assert clipped == 0
