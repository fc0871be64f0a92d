"""The three pages: state in the URL, htmx fragments, legend, and loading, empty, error and 404
states that each say which they are."""

import json
import re
from datetime import timedelta

import pytest
from django.db import DatabaseError
from django.utils import timezone

from hud import views_summary
from relay.models import FailedTest
from relay.tallies import buckets
from tests.hud.test_selectors_summary import job, project  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]
HTMX = {"HTTP_HX_REQUEST": "true"}


def recent(hours: float = 1):
    return timezone.now() - timedelta(hours=hours)


def test_it_renders_the_summary_with_a_legend_and_the_backend_rows(client):
    backend = project("intel/torch-xpu-ops", level="L4")
    job(backend, "failure", at=recent())
    page = client.get("/crcr").content.decode()
    assert "intel/torch-xpu-ops" in page and "Status legend" in page
    assert "passed on retry" in page and "flaky (passed on retry)" not in page and "Relay health" in page


def test_it_keeps_range_and_kind_of_run_in_the_url(client):
    page = client.get("/crcr?range=30d&event=nightly").content.decode()
    assert re.search(r'href="\?range=30d&amp;event=nightly" aria-current', page)
    assert 'hx-get="?range=30d&amp;event=nightly"' in page


@pytest.mark.parametrize("path", ["/crcr", "/crcr/intel/torch-xpu-ops", "/crcr/metrics"])
def test_every_summary_page_offers_1_7_14_30_and_90_days(client, path):
    project("intel/torch-xpu-ops")
    page = client.get(path + "?range=90d").content.decode()
    for label in ("Last 24 hours", "Last 7 days", "Last 14 days", "Last 30 days", "Last 90 days"):
        assert f">{label}</a>" in page
    assert re.search(r'href="\?range=90d[^"]*" aria-current', page)


def test_it_falls_back_to_defaults_for_unknown_parameters(client):
    page = client.get("/crcr?range=1y&event=bogus").content.decode()
    assert 'hx-get="?range=7d&amp;event=pr"' in page


def test_it_answers_htmx_with_the_refresh_fragment_only(client):
    response = client.get("/crcr?range=24h", **HTMX)
    body = response.content.decode()
    assert response.status_code == 200 and response["Vary"] == "HX-Request"
    assert body.lstrip().startswith('<div id="summary-body"') and "<html" not in body


def test_it_says_when_no_backend_is_registered(client):
    assert "No backends are registered yet" in client.get("/crcr").content.decode()


def test_it_renders_a_failed_query_as_an_error_with_status_503_never_as_no_data(client, monkeypatch):
    def broken(*args, **kwargs):
        raise DatabaseError("connection lost")

    monkeypatch.setattr(views_summary, "summary_build", broken)
    response = client.get("/crcr")
    assert response.status_code == 503 and response["Retry-After"] == "60"
    assert "Could not load the summary" in response.content.decode()
    assert "No backends are registered" not in response.content.decode()


def test_it_shows_a_loading_state_that_polls_while_a_cold_window_fills(client, monkeypatch):
    backend = project()
    job(backend, at=recent(3))
    job(backend, sha="b" * 40, at=recent(50))
    monkeypatch.setattr(buckets, "COMPUTE_BUDGET_SECONDS", -1)
    page = client.get("/crcr?range=30d", **HTMX).content.decode()
    assert "Loading:" in page and "time buckets ready" in page and 'hx-trigger="load delay:1s"' in page


def test_it_answers_an_unknown_backend_with_a_404_page(client):
    response = client.get("/crcr/nobody/nothing")
    assert response.status_code == 404
    assert "No backend called" in response.content.decode() and "nobody/nothing" in response.content.decode()


def test_a_nightly_only_backend_s_page_opens_on_its_nightly_runs(client):
    backend = project("TorchedHat/pytorch-redhat-ci", events=["nightly"])
    job(backend, "failure", at=recent(), sha="d" * 40, event_type="nightly")
    page = client.get("/crcr/TorchedHat/pytorch-redhat-ci").content.decode()
    assert re.search(r'<a href="[^"]*event=nightly[^"]*" aria-current="page">Nightly</a>', page)
    assert "d" * 10 in page, "its nightly head is listed"
    page = client.get("/crcr/TorchedHat/pytorch-redhat-ci?event=pr").content.decode()
    assert re.search(r'aria-current="page">Pull requests</a>', page), "an explicit tab is kept"


def test_it_renders_the_backend_dashboard_with_matrix_links_and_readiness(client):
    backend = project("Intel/torch-xpu-ops", level="L3")
    job(
        backend,
        "failure",
        at=recent(),
        sha="c" * 40,
        workflow_url="https://github.com/intel/torch-xpu-ops/actions/runs/4",
        check_run_id="8",
    )
    page = client.get("/crcr/intel/torch-xpu-ops?range=24h").content.decode()
    assert "Level readiness" in page and "Keeps level · 7 days" in page
    assert "https://github.com/pytorch/pytorch/commit/" + "c" * 40 in page
    assert "https://github.com/pytorch/pytorch/pull/12" in page
    assert "cell=" + "c" * 40 + ":build" in page


def test_it_keeps_the_shard_toggle_in_the_url(client):
    backend = project("a/b")
    for name in ("test-1", "test-2"):
        job(backend, name=name, at=recent())
    grouped = client.get("/crcr/a/b").content.decode()
    split = client.get("/crcr/a/b?shards=split").content.decode()
    assert "Shard grouping: on" in grouped and 'href="?range=7d&amp;event=pr&amp;page=1&amp;shards=split"' in grouped
    assert "Shard grouping: off" in split and "test-2" in split


def test_it_serves_a_cell_drill_down_as_an_htmx_fragment(client):
    backend = project("a/b")
    failed = job(
        backend, "failure", at=recent(), workflow_url="https://github.com/a/b/actions/runs/4", check_run_id="8"
    )
    FailedTest.objects.create(job_run=failed, name="test_matmul", message="mismatch")
    response = client.get(f"/crcr/a/b?cell={'a' * 40}:build", HTTP_HX_TARGET="cell-detail", **HTMX)
    body = response.content.decode()
    assert body.lstrip().startswith('<section id="cell-detail"')
    assert "test_matmul" in body and "https://github.com/a/b/actions/runs/4/job/8" in body


def test_it_renders_the_selected_cell_on_a_full_page_load(client):
    job(project("a/b"), "failure", at=recent(), workflow_url="https://github.com/a/b/actions/runs/4")
    page = client.get(f"/crcr/a/b?cell={'a' * 40}:build").content.decode()
    assert 'href="https://github.com/a/b/actions/runs/4">downstream run' in page
    assert "Select a cell in the matrix" not in page


def test_it_renders_the_metrics_page_with_plotly_figures_as_json(client):
    backend = project("a/b")
    job(backend, "success", at=recent())
    page = client.get("/crcr/metrics?range=7d&level=L2").content.decode()
    assert "vendor/plotly-basic.min.js" in page and "js/hud-charts.js" in page
    figure = json.loads(
        re.search(r'<script id="figure-pass-rate" type="application/json">(.*?)</script>', page, re.S).group(1)
    )
    points = [y for y in figure["data"][0]["y"] if y is not None]  # the job's day, whatever the hour now
    assert figure["data"][0]["name"] == "a/b" and points == [100.0]


def test_it_keeps_metrics_filters_in_the_url_and_says_when_nothing_matches(client):
    project("a/b")
    page = client.get("/crcr/metrics?level=L4&backend=a/b").content.decode()
    assert "No backend at L2 or above matches these filters" in page
    assert 'hx-get="?range=7d&amp;event=pr&amp;level=L4&amp;backend=a%2Fb"' in page


def test_it_says_when_backends_in_view_have_no_results(client):
    project("a/b")
    assert "No pr results from the backends in view" in client.get("/crcr/metrics").content.decode()


def test_it_renders_a_failed_backend_query_as_an_error_with_status_503(client, monkeypatch):
    project("a/b")

    def broken(*args, **kwargs):
        raise DatabaseError("disk I/O error")

    monkeypatch.setattr(views_summary, "dashboard_build", broken)
    response = client.get("/crcr/a/b", **HTMX)
    assert response.status_code == 503 and "Could not load this backend" in response.content.decode()


def test_it_renders_a_failed_cell_query_in_the_cell_slot(client, monkeypatch):
    project("a/b")

    def broken(*args, **kwargs):
        raise DatabaseError("disk I/O error")

    monkeypatch.setattr(views_summary, "cell_detail", broken)
    response = client.get(f"/crcr/a/b?cell={'a' * 40}:build", HTTP_HX_TARGET="cell-detail", **HTMX)
    body = response.content.decode()
    assert (
        response.status_code == 503
        and body.lstrip().startswith('<section id="cell-detail"')
        and "Could not load this cell" in body
    )


def test_it_renders_failed_metrics_as_an_error_with_status_503(client, monkeypatch):
    def broken(*args, **kwargs):
        raise DatabaseError("timeout")

    monkeypatch.setattr(views_summary, "metrics_build", broken)
    response = client.get("/crcr/metrics")
    assert response.status_code == 503 and "Could not load the metrics" in response.content.decode()


def test_it_explains_that_an_l1_backend_has_no_results(client):
    project("listen/only", level="L1")
    page = client.get("/crcr/listen/only").content.decode()
    assert "L1 backends report no results" in page and "readiness cannot be judged" in page


@pytest.mark.parametrize("path", ["/crcr", "/crcr/metrics", "/crcr/a/b"])
def test_every_summary_page_offers_the_same_ranges_with_the_same_default(client, path):
    project("a/b")
    page = client.get(path).content.decode()
    for key in ("24h", "7d", "14d", "30d", "90d"):
        assert f"range={key}" in page, f"{path} does not offer {key}"
    assert "range=3d" not in page and 'aria-current="true">Last 7 days<' in page


@pytest.mark.parametrize("path", ["/crcr", "/crcr/metrics", "/crcr/a/b"])
def test_one_day_is_read_as_24_hours_and_an_unknown_range_says_what_is_shown(client, path):
    project("a/b")
    assert 'aria-current="true">Last 24 hours<' in client.get(f"{path}?range=1d").content.decode()
    unknown = client.get(f"{path}?range=2w").content.decode()
    assert "Unknown range “2w”: showing last 7 days" in unknown


def test_the_summary_shows_each_relay_alert_with_since_when_it_fires(client):
    from relay.health.alerts import alerts_evaluate
    from relay.models import Project

    Project.objects.create(full_name="pytorch/crcr-test", level="L2", is_health_probe=True, hardware_kind="probe")
    page = client.get("/crcr").content.decode()
    assert 'id="alerts"' in page and page.count("Not evaluated") == 3
    fired_at = timezone.now() - timedelta(hours=2)
    alerts_evaluate(fired_at)
    page = client.get("/crcr").content.decode()
    silent = re.search(r'data-alert="probe_nightly_silent">(.*?)</li>', page, re.S).group(1)
    assert "Firing" in silent and f'since <time datetime="{fired_at:%Y-%m-%dT%H:%M:%S}' in silent
    assert "(2 h ago)" in silent and "no nightly probe has ever completed" in silent
    unexpected = re.search(r'data-alert="probe_nightly_unexpected">(.*?)</li>', page, re.S).group(1)
    assert "OK" in unexpected and "alerts when &gt; 0 in 24 h" in unexpected
    assert "1 firing" in page


def chip_status(level, mets, no_data=False):
    from types import SimpleNamespace

    from relay.levels.criteria import Criterion, level_change

    criteria = [Criterion(f"c{i}", "c", "", "", met) for i, met in enumerate(mets)]
    change = None if no_data else level_change(level, criteria, criteria)  # as relay.levels.status decides
    return SimpleNamespace(project=SimpleNamespace(level=level), criteria=criteria, no_data=no_data, change=change)


@pytest.mark.parametrize(
    "level, mets, no_data, text, tone",
    [
        ("L2", [True] * 7, False, "Promotion: 7/7 met", "ok"),
        ("L2", [True] * 6 + [None], False, "Promotion: 6/7 met", "neutral"),
        ("L2", [True, False], False, "Promotion: 1/2 met", "neutral"),
        ("L3", [True, True, True], False, "Demotion: 0/3 at risk", "ok"),
        ("L3", [True, False, None], False, "Demotion: 1/3 at risk", "bad"),
        ("L4", [None, None, None], True, "Demotion: no data", "neutral"),
        ("L2", [None] * 7, True, "Promotion: no data", "neutral"),
        ("L3", [None, None, None], False, "Demotion: not enough data yet", "neutral"),
        ("L2", [None] * 7, False, "Promotion: not enough data yet", "neutral"),
    ],
)
def test_a_readiness_chip_is_green_only_when_all_are_met_and_red_when_any_is_at_risk(level, mets, no_data, text, tone):
    from hud.selectors_summary import readiness_chip

    chip = readiness_chip(chip_status(level, mets, no_data))
    assert (chip.text, chip.tone) == (text, tone)


def test_the_overview_shows_a_readiness_chip_for_every_l2_and_l3_backend(client):
    l3 = project("Ascend/pytorch", level="L3")
    l2 = project("pytorch-mps/mps-ci", level="L2")
    for i in range(10):
        job(l3, "failure" if i < 2 else "success", sha=f"{i:040x}", at=recent())
    page = client.get("/crcr").content.decode()
    l3_row = re.search(r'href="/crcr/Ascend/pytorch\?.*?</td>', page, re.S).group(0)
    assert re.search(r'class="chip readiness-chip bad"[^>]*>Demotion: 1/3 at risk<', l3_row)  # 80 % pass rate
    l2_row = re.search(r'href="/crcr/pytorch-mps/mps-ci\?.*?</td>', page, re.S).group(0)
    assert "Promotion: no data" in l2_row
    assert l2.level == "L2"
