"""Triage in Chromium, on a trunk in the shapes real producers send (see tests/triage/conftest.py):
marking a failure as known from the grid's tooltip changes its mark on the grid and the commit
page; a failure shared by two backends shows up as a suggested issue with its culprit range; an
expected failure that keeps passing is flagged."""

import pytest

from tests.triage.conftest import ROCM_ADDMM, XPU_ADDMM, make_trunk, result

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def backends(transactional_db):
    from relay.models import Project

    return {
        "ref": Project.objects.create(
            full_name="pytorch/openreg-ci",
            level="L2",
            is_reference=True,
            display_name="OpenReg",
            hardware_kind="reference",
        ),
        "xpu": Project.objects.create(
            full_name="intel/torch-xpu-ops", level="L4", display_name="Intel XPU", hardware_kind="gpu"
        ),
        "rocm": Project.objects.create(
            full_name="ROCm/pytorch", level="L3", device="rocm", display_name="AMD ROCm", hardware_kind="gpu"
        ),
    }


@pytest.fixture
def signed_in(page, live_server, django_user_model):
    """A maintainer's session in the browser (a superuser, as admins make them)."""
    return _sign_in(page, live_server, django_user_model)


def _sign_in(page, live_server, django_user_model):
    from django.test import Client

    client = Client()
    client.force_login(django_user_model.objects.create_superuser("maintainer", "m@example.org", "x" * 24))
    page.context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    return page


def _cell(page, sha, project):
    return page.locator(f'#hud-grid tr[data-sha="{sha}"] td.c[data-p="{project.pk}"]')


def test_marking_a_failure_as_known_changes_its_mark_on_the_grid_and_the_commit_page(
    signed_in, live_server, backends, screenshots
):
    page = signed_in
    trunk = make_trunk(4)
    for i, commit in enumerate(trunk):
        result(backends["ref"], commit.sha)
        result(backends["xpu"], commit.sha, [XPU_ADDMM] if i == 3 else [])
    c3 = trunk[3].sha
    page.goto(live_server.url + "/")
    page.wait_for_selector("#hud-grid td.c")
    assert _cell(page, c3, backends["xpu"]).locator("i.mk-backend").count() == 1
    _cell(page, c3, backends["xpu"]).click()
    page.locator("#hud-tip a.mark-known-link").click()
    page.wait_for_selector("form.issue-form")
    assert page.input_value("textarea[name=test_patterns]") == "test_ops.TestCommon.test_addmm_float32"
    page.fill("input[name=url]", "https://github.com/intel/torch-xpu-ops/issues/1234")
    page.screenshot(path=str(screenshots / "triage-mark-as-known-form.png"), full_page=True)
    page.click("form.issue-form button[type=submit]")
    page.wait_for_selector("h1:has-text('#')")
    assert "Intel XPU" in page.inner_text("main"), "the occurrence the failure made is listed"

    page.goto(live_server.url + "/")
    page.wait_for_selector("#hud-grid td.c")
    cell = _cell(page, c3, backends["xpu"])
    assert cell.locator("i.mk-known").count() == 1 and cell.locator("i.mk-backend").count() == 0
    assert "known" in cell.get_attribute("title")
    page.screenshot(path=str(screenshots / "triage-grid-known.png"), full_page=True)

    page.goto(live_server.url + f"/commit/{c3}")
    row = page.locator("table.baseline-table tr", has_text="Intel XPU")
    assert "known" in row.inner_text() and "1 excluded" in row.inner_text()
    known = page.locator(f"details#compare-{backends['xpu'].pk}")
    known.locator("summary").click()
    assert "Known or expected" in known.inner_text() and "Backend-specific" not in known.inner_text()
    assert known.locator("a[href='https://github.com/intel/torch-xpu-ops/issues/1234']").count() == 1
    page.screenshot(path=str(screenshots / "triage-commit-known.png"), full_page=True)


def test_a_failure_shared_by_two_backends_is_suggested_and_one_click_makes_it_known(
    signed_in, live_server, backends, screenshots
):
    page = signed_in
    trunk = make_trunk(5)
    for i, commit in enumerate(trunk):
        result(backends["ref"], commit.sha)
        result(backends["xpu"], commit.sha, [XPU_ADDMM] if i >= 3 else [])
        result(backends["rocm"], commit.sha, [ROCM_ADDMM] if i >= 3 else [])
    page.goto(live_server.url + "/known-issues/suggested")
    suggestion = page.locator("li.suggestion")
    assert suggestion.count() == 1
    text = suggestion.inner_text()
    assert "test_ops.TestCommon.test_addmm_float32" in text and "Intel XPU" in text and "AMD ROCm" in text
    assert f"failing since {trunk[3].sha[:7]}" in text and f"last passed at {trunk[2].sha[:7]}" in text
    page.screenshot(path=str(screenshots / "triage-suggested.png"), full_page=True)
    suggestion.locator("a.make-issue").click()
    page.click("form.issue-form button[type=submit]")
    page.wait_for_selector("h1:has-text('#')")
    page.goto(live_server.url + "/known-issues/suggested")
    assert page.locator("li.suggestion").count() == 0 and "Nothing to suggest" in page.inner_text("main")


def test_an_expected_failure_that_passes_is_flagged_and_one_that_fails_is_not_red(
    page, live_server, backends, screenshots, settings
):
    from relay.triage.expectations import expectations_replace

    settings.CRCR_EXPECTATION_PASSES = 3
    trunk = make_trunk(5)
    expectations_replace(backends["xpu"], "TestCommon.test_addmm*,Fail   # OOM on the runner\n", by="intel-ci")
    for i, commit in enumerate(trunk):
        result(backends["ref"], commit.sha)
        result(backends["xpu"], commit.sha, [XPU_ADDMM] if i == 0 else [])
    page.goto(live_server.url + "/")
    page.wait_for_selector("#hud-grid td.c")
    expected = _cell(page, trunk[0].sha, backends["xpu"])
    assert expected.locator("i.mk-expected").count() == 1 and "xp" in expected.get_attribute("class")
    background = expected.evaluate("el => getComputedStyle(el).backgroundColor")
    assert background in ("rgba(0, 0, 0, 0)", "transparent"), f"an expected failure is not red: {background}"
    page.screenshot(path=str(screenshots / "triage-grid-expected.png"), full_page=True)

    page.goto(live_server.url + "/known-issues")
    flagged = page.locator("#unexpectedly-passing tr.unexpected-pass")
    assert flagged.count() == 1
    assert (
        "TestCommon.test_addmm*" in flagged.inner_text()
        and "unexpectedly passing" in flagged.inner_text()
        and "4 trunk commits" in flagged.inner_text()
    )
    page.screenshot(path=str(screenshots / "triage-unexpectedly-passing.png"), full_page=True)


def test_the_triage_pages_fit_a_390_px_phone(browser, live_server, backends, django_user_model):
    from relay.triage import issues

    trunk = make_trunk(3)
    for commit in trunk:
        result(backends["xpu"], commit.sha, [XPU_ADDMM])
        result(backends["rocm"], commit.sha, [ROCM_ADDMM])
    issue = issues.known_issue_create(
        {"title": "addmm fails everywhere", "test_patterns": ["TestCommon.test_addmm*"]}, by="alice"
    )
    issues.occurrences_backfill(issue.pk)
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    _sign_in(page, live_server, django_user_model)  # /notifications is for signed-in users
    for path in ("/known-issues", f"/known-issues/{issue.pk}", "/known-issues/suggested", "/notifications"):
        page.goto(live_server.url + path)
        assert page.url == live_server.url + path, page.url
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, path
    context.close()
