"""What the HUD's mouse and keyboard conventions need from the server: a cell's job log
(double-click), the commit page's expanded sections in the URL, the deliveries' tabs, the
favicon, and the admin's sandbox banner."""

import re

import pytest

from tests.factories import JobRunFactory

pytestmark = pytest.mark.django_db


def test_a_cells_log_is_its_failing_jobs_log(client, world):
    JobRunFactory(
        project=world["xpu"],
        head_sha=world["commit"].sha,
        job_name="build",
        conclusion="success",
        run_id="555",
        check_run_id="777",
    )
    response = client.get("/", {"log": f"{world['commit'].sha}.{world['xpu'].id}"})
    job = world["job"]
    assert response.status_code == 302 and response["Location"] == f"{job.workflow_url}/job/123456"


def test_an_expanded_job_column_opens_that_jobs_log(client, world):
    JobRunFactory(
        project=world["xpu"],
        head_sha=world["commit"].sha,
        job_name="build",
        conclusion="success",
        run_id="555",
        check_run_id="777",
    )
    response = client.get("/", {"log": f"{world['commit'].sha}.{world['xpu'].id}", "job": "ci / build"})
    assert response["Location"] == "https://github.com/intel/torch-xpu-ops/actions/runs/555/job/777"


def test_a_cell_without_jobs_or_a_link_says_there_is_no_log(client, world):
    missing = client.get("/", {"log": f"{world['commit'].sha}.{world['sgl'].id}"})
    assert missing.status_code == 404 and "No job has reported for this cell" in missing.content.decode()
    JobRunFactory(project=world["rocm"], head_sha="e" * 40, workflow_url="javascript:alert(1)")
    unsafe = client.get("/", {"log": f"{'e' * 40}.{world['rocm'].id}"})
    assert unsafe.status_code == 404 and "reported no link" in unsafe.content.decode()


def test_a_malformed_log_key_is_a_400(client, world):
    response = client.get("/", {"log": "not-a-cell"})
    assert response.status_code == 400 and "is not a cell" in response.content.decode()


def backend_boxes(html: str) -> dict[str, bool]:
    """{backend id: expanded} for the commit page's per-backend sections."""
    return {
        m.group(1): " open" in m.group(0)
        for m in re.finditer(r'<details class="backend-box[^>]*data-backend="(\d+)"[^>]*>', html)
    }


def test_the_commit_pages_backend_sections_start_collapsed_and_the_url_expands_them(client, world):
    url = f"/commit/{world['commit'].sha}"
    assert set(backend_boxes(client.get(url).content.decode()).values()) == {False}
    boxes = backend_boxes(client.get(url, {"open": f"{world['xpu'].id},junk,{world['rocm'].id}"}).content.decode())
    assert {pid for pid, expanded in boxes.items() if expanded} == {
        str(world["xpu"].id),
        str(world["rocm"].id),
    } and len(boxes) > 2
    everything = client.get(url, {"open": "all"}).content.decode()
    assert set(backend_boxes(everything).values()) == {True} and "collapse all" in everything


def test_the_deliveries_page_shows_deliveries_or_upstream_writes_in_tabs(admin_client, world):
    client = admin_client  # an operator page: staff only
    deliveries = client.get("/relay/deliveries").content.decode()
    assert (
        'aria-current="page">Deliveries (in)' in deliveries
        and 'id="deliveries"' in deliveries
        and "upstream-write-rows" not in deliveries
    )
    writes = client.get("/relay/deliveries?view=writes").content.decode()
    assert (
        'aria-current="page">Upstream writes (out)' in writes
        and "No upstream writes yet" in writes
        and 'id="deliveries"' not in writes
    )


def test_the_favicon_is_linked_from_every_page_and_answers_at_the_root(client, world):
    assert 'rel="icon" href="/static/favicon.svg"' in client.get("/").content.decode()
    response = client.get("/favicon.ico")
    assert response.status_code == 302 and response["Location"] == "/static/favicon.svg"


@pytest.mark.parametrize("sandbox", [True, False])
def test_the_admin_carries_the_sandbox_banner_only_in_sandbox_mode(client, settings, sandbox):
    settings.CRCR_SANDBOX = sandbox
    page = client.get("/admin/login/").content.decode()
    assert ("Sandbox mode." in page) is sandbox and "CRCR HUD admin" in page and "favicon.svg" in page


def test_grid_headers_say_times_are_utc_and_offer_highlight_and_expand_separately(client, world):
    html = client.get("/").content.decode()
    assert 'Time <span class="muted">UTC</span>' in html
    assert 'class="expand-link"' in html and 'class="col-name" aria-pressed="false"' in html
    assert html.count('class="skip-link" href="#hud-grid"') == 1
