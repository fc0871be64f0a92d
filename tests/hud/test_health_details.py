"""A relay-health card's details (/crcr/health/<card>): the last runs with "P/N jobs passed" and
links, only the jobs needing attention ("job: state · time", linked to the log; "overdue in
progress"), an htmx fragment for the dialog and a page of its own without JavaScript, and explicit
empty, error and unknown-card states."""

import re
from datetime import timedelta

import pytest
from django.db import DatabaseError
from django.utils import timezone

from hud import views_summary
from relay.models import JobRun, Project
from tests.hud.test_selectors_summary import job, project

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def probe():
    return Project.objects.create(
        full_name="pytorch/crcr-test", level="L4", is_health_probe=True, hardware_kind="probe", github_repo_id=9
    )


def probe_run(probe, run_id, outcomes, pr=7, at=None):
    at = at or timezone.now() - timedelta(minutes=30)
    for name, conclusion in outcomes.items():
        job(
            probe,
            conclusion,
            name=name,
            run_id=run_id,
            pr_number=pr,
            sha=f"{int(run_id):040x}",
            at=at,
            check_run_id=f"9{run_id}{len(name)}",
            workflow_url=f"https://github.com/pytorch/crcr-test/actions/runs/{run_id}",
            completed_at=at,
        )


def test_the_probe_card_lists_its_last_runs_with_p_of_n_passed_and_only_the_jobs_needing_attention(client, probe):
    probe_run(probe, "101", {"smoke": "success", "xfail": "failure", "xcancel": "cancelled"})
    probe_run(probe, "102", {"smoke": "failure", "xfail": "success"})
    fragment = client.get("/crcr/health/probe", **HTMX).content.decode()
    assert "<html" not in fragment and 'id="health-dialog-title">Relay health probe<' in fragment
    assert "3/3 jobs passed" in fragment and "0/2 jobs passed" in fragment
    assert 'href="https://github.com/pytorch/crcr-test/actions/runs/101"' in fragment
    attention = fragment.split("Needs attention", 1)[1].split("Last runs", 1)[0]
    assert "ci / smoke: failure" in attention and "ci / xfail: failure" in attention  # the x-probe that passed
    assert "xcancel" not in attention, "a job that ended as built needs no attention"
    assert re.search(
        r'href="https://github.com/pytorch/crcr-test/actions/runs/102/job/\d+">pytorch/crcr-test ci / smoke', attention
    )


def test_a_job_running_past_its_expected_duration_is_overdue_in_progress(client, probe, settings):
    settings.CRCR_JOB_EXPECTED_MINUTES = 20
    job(probe, status="in_progress", name="xtimeout", run_id="103", in_progress_at=timezone.now() - timedelta(hours=1))
    fragment = client.get("/crcr/health/probe", **HTMX).content.decode()
    assert "pytorch/crcr-test ci / xtimeout: overdue in progress" in fragment and "started 1 h ago" in fragment
    assert "0/0 jobs passed · 1 running" in fragment


def test_without_javascript_the_details_are_a_page_of_their_own(client, probe):
    probe_run(probe, "101", {"smoke": "success"})
    page = client.get("/crcr/health/probe").content.decode()
    assert "<html" in page and "1/1 jobs passed" in page and "Cross-repository CI summary" in page


def test_every_card_on_the_summary_links_its_details_and_the_page_holds_the_dialog(client, probe):
    page = client.get("/crcr").content.decode()
    for key in ("probe", "deliveries", "dispatch", "callbacks", "sweeper"):
        assert f'href="/crcr/health/{key}" data-health-dialog hx-get="/crcr/health/{key}"' in page
        assert client.get(f"/crcr/health/{key}", **HTMX).status_code == 200
    assert '<dialog id="health-dialog"' in page and "js/hud-health.js" in page


def test_a_card_with_nothing_recorded_says_so(client):
    fragment = client.get("/crcr/health/callbacks", **HTMX).content.decode()
    assert 'class="empty" role="status">No callback has been accepted yet.' in fragment


def test_the_callbacks_card_counts_runs_across_backends_by_their_latest_attempts(client):
    backend = project("intel/torch-xpu-ops", level="L4")
    job(backend, "failure", name="test", run_id="5", attempt=1)
    job(backend, "success", name="test", run_id="5", attempt=2)
    job(backend, "success", name="build", run_id="5")
    fragment = client.get("/crcr/health/callbacks", **HTMX).content.decode()
    assert "intel/torch-xpu-ops · ci #5 · PR #12" in fragment and "2/2 jobs passed" in fragment
    assert "Nothing needs attention." in fragment


def test_an_unknown_card_is_404_and_names_the_cards(client):
    response = client.get("/crcr/health/nope", **HTMX)
    assert (
        response.status_code == 404 and "probe, deliveries, dispatch, callbacks, sweeper" in response.content.decode()
    )


def test_a_failed_query_is_an_error_state_with_503_never_an_empty_dialog(client, monkeypatch):
    def broken(key):
        raise DatabaseError("down")

    monkeypatch.setattr(views_summary, "health_details", broken)
    response = client.get("/crcr/health/probe", **HTMX)
    assert response.status_code == 503 and "Could not load the details." in response.content.decode()
    assert JobRun.objects.count() == 0
