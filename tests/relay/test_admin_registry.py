import pytest
from django.test import Client
from django.urls import reverse

from relay.models import LevelChange, Project
from relay.registry.service import project_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create_superuser("alice", "alice@example.com", "correct horse battery staple")


@pytest.fixture
def browser(alice):
    """A logged-in admin whose every POST must carry the CSRF token, as a real browser's does."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    return client


@pytest.fixture
def xpu():
    return project_create(
        "intel/torch-xpu-ops", "L2", by="ops", reason="onboarding", display_name="Intel XPU", oncalls=["xpu-oncall"]
    )


def change_url(project: Project) -> str:
    return reverse("admin:relay_project_change", args=[project.pk])


def form_data(project: Project, **changes) -> dict:
    """The change form as the browser posts it: every field, plus the history inline's management form."""
    history = project.level_changes.count()
    data = {
        "full_name": project.full_name,
        "display_name": project.display_name,
        "github_repo_id": project.github_repo_id or "",
        "level": project.level,
        "device": project.device,
        "level_change_reason": "",
        "oncalls": ", ".join(project.oncalls),
        "position": project.position,
        "hardware_kind": project.hardware_kind,
        "ci_provider": project.ci_provider,
        "require_callback_token": "unknown",
        "rate_limit_per_min": "",
        "bisect_daily_budget": project.bisect_daily_budget,
        "bisect_event_type": project.bisect_event_type,
        "active": "on",
        "level_changes-TOTAL_FORMS": history,
        "level_changes-INITIAL_FORMS": history,
        "level_changes-MIN_NUM_FORMS": 0,
        "level_changes-MAX_NUM_FORMS": 1000,
    }
    return {**data, **changes}


def post(browser: Client, url: str, data: dict):
    browser.get(url)  # sets the CSRF cookie
    return browser.post(url, {**data, "csrfmiddlewaretoken": browser.cookies["csrftoken"].value})


def test_it_changes_a_level_with_a_reason_and_audits_it_under_the_admins_username(browser, xpu):
    response = post(
        browser, change_url(xpu), form_data(xpu, level="L4", level_change_reason="merge-blocking from today")
    )
    assert response.status_code == 302
    xpu.refresh_from_db()
    change = xpu.level_changes.first()
    assert xpu.level == "L4"
    assert (change.from_level, change.to_level, change.changed_by, change.reason) == (
        "L2",
        "L4",
        "alice",
        "merge-blocking from today",
    )


def test_it_refuses_a_level_change_without_a_reason(browser, xpu):
    response = post(browser, change_url(xpu), form_data(xpu, level="L4"))
    assert response.status_code == 200
    assert "Say why the level changes" in response.content.decode()
    xpu.refresh_from_db()
    assert xpu.level == "L2" and xpu.level_changes.count() == 1


def test_it_saves_other_fields_without_a_reason_or_an_audit_row(browser, xpu):
    response = post(browser, change_url(xpu), form_data(xpu, display_name="Intel GPU (XPU)", oncalls="@alice, bob"))
    assert response.status_code == 302
    xpu.refresh_from_db()
    assert (xpu.display_name, xpu.oncalls) == ("Intel GPU (XPU)", ["alice", "bob"])
    assert xpu.level_changes.count() == 1


def test_it_refuses_l3_without_a_device_and_an_oncall_that_is_not_a_handle(browser, xpu):
    response = post(
        browser, change_url(xpu), form_data(xpu, level="L3", level_change_reason="try", oncalls="not a handle")
    )
    assert response.status_code == 200
    assert "is not a GitHub handle" in response.content.decode()
    assert "An L3 project needs a device" in response.content.decode()
    assert Project.objects.get(pk=xpu.pk).level == "L2"


def test_it_moves_a_project_to_l3_with_its_device(browser, xpu):
    post(browser, change_url(xpu), form_data(xpu, level="L3", device="xpu", level_change_reason="check runs on label"))
    xpu.refresh_from_db()
    assert (xpu.level, xpu.device, xpu.level_changes.first().to_level) == ("L3", "xpu", "L3")


def test_it_shows_the_level_history_on_the_change_page(browser, xpu):
    post(browser, change_url(xpu), form_data(xpu, level="L4", level_change_reason="merge-blocking from today"))
    page = browser.get(change_url(xpu)).content.decode()
    assert "Level history" in page
    assert "merge-blocking from today" in page and "onboarding" in page and "alice" in page


def test_a_backend_opts_in_to_bisection_with_its_budget_and_event_type_and_is_off_by_default(browser, xpu):
    assert not xpu.bisect_enabled and xpu.bisect_daily_budget == 20
    changes = {"bisect_enabled": "on", "bisect_daily_budget": 5, "bisect_event_type": "xpu-bisect"}
    assert post(browser, change_url(xpu), form_data(xpu, **changes)).status_code == 302
    xpu.refresh_from_db()
    assert (xpu.bisect_enabled, xpu.bisect_daily_budget, xpu.bisect_event_type) == (True, 5, "xpu-bisect")


def test_it_enforces_csrf_on_the_change_form(browser, xpu):
    response = browser.post(change_url(xpu), form_data(xpu, level="L4", level_change_reason="no token"))
    assert response.status_code == 403
    assert Project.objects.get(pk=xpu.pk).level == "L2"


def test_it_records_the_initial_level_when_a_project_is_added(browser):
    data = {
        "full_name": "ROCm/pytorch",
        "display_name": "AMD ROCm",
        "level": "L3",
        "device": "rocm",
        "oncalls": "rocm-ci",
        "level_change_reason": "onboarding",
        "position": 0,
        "hardware_kind": "gpu",
        "ci_provider": "github",
        "require_callback_token": "unknown",
        "bisect_daily_budget": 20,
        "bisect_event_type": "crcr-bisect",
        "active": "on",
    }
    response = post(browser, reverse("admin:relay_project_add"), data)
    assert response.status_code == 302
    change = Project.objects.get(full_name="ROCm/pytorch").level_changes.get()
    assert (change.from_level, change.to_level, change.changed_by, change.reason) == ("", "L3", "alice", "onboarding")


def test_it_refuses_to_add_a_repository_that_is_not_owner_and_repo(browser):
    data = {
        "full_name": "rocm",
        "level": "L2",
        "position": 0,
        "hardware_kind": "gpu",
        "ci_provider": "github",
        "require_callback_token": "unknown",
    }
    response = post(browser, reverse("admin:relay_project_add"), data)
    assert response.status_code == 200 and not Project.objects.exists()


def test_it_deactivates_selected_projects_without_touching_their_level(browser, xpu):
    url = reverse("admin:relay_project_changelist")
    response = post(browser, url, {"action": "deactivate_selected", "_selected_action": [xpu.pk]})
    assert response.status_code == 302
    xpu.refresh_from_db()
    assert (xpu.active, xpu.level, xpu.level_changes.count()) == (False, "L2", 1)


def test_it_lists_projects_with_filters_and_search(browser, xpu):
    page = browser.get(reverse("admin:relay_project_changelist"), {"q": "xpu", "level__exact": "L2"}).content.decode()
    assert "intel/torch-xpu-ops" in page


def test_it_shows_the_audit_log_read_only(browser, xpu):
    change = LevelChange.objects.get()
    assert browser.get(reverse("admin:relay_levelchange_changelist")).status_code == 200
    assert browser.get(reverse("admin:relay_levelchange_add")).status_code == 403
    assert browser.get(reverse("admin:relay_levelchange_delete", args=[change.pk])).status_code == 403
    response = post(browser, reverse("admin:relay_levelchange_change", args=[change.pk]), {"reason": "rewritten"})
    assert response.status_code == 403
    assert LevelChange.objects.get().reason == "onboarding"


@pytest.mark.parametrize("name", ["installation", "installedrepo"])
def test_it_shows_installations_read_only(browser, name):
    assert browser.get(reverse(f"admin:relay_{name}_changelist")).status_code == 200
    assert browser.get(reverse(f"admin:relay_{name}_add")).status_code == 403


def test_it_sets_what_a_project_takes_part_in_and_none_ticked_means_both(browser, xpu):
    assert post(browser, change_url(xpu), form_data(xpu, events=["nightly"])).status_code == 302
    xpu.refresh_from_db()
    assert xpu.events == ["nightly"] and xpu.nightly_only
    assert post(browser, change_url(xpu), form_data(xpu)).status_code == 302
    xpu.refresh_from_db()
    assert xpu.events == [] and xpu.takes_pull_requests and xpu.takes_part_in("nightly")


def test_an_admin_declares_a_backend_s_variant_keys_and_an_unknown_key_is_refused(browser, xpu):
    saved = post(browser, change_url(xpu), form_data(xpu, variant_keys='["device", "os"]'))
    assert saved.status_code == 302
    xpu.refresh_from_db()
    assert xpu.variant_keys == ["device", "os"]
    refused = post(browser, change_url(xpu), form_data(xpu, variant_keys='["gpu"]'))
    assert refused.status_code == 200 and "A list of distinct keys among: device, sdk" in refused.content.decode()
    xpu.refresh_from_db()
    assert xpu.variant_keys == ["device", "os"]
