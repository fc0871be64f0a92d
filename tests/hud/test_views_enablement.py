"""/crcr/enablement, /crcr/enablement/<org>/<repo>, the backend page's plot and the API: the
reference's row first, cells true to the counts, a module's drop into skips named with its
commit, un-skip candidates; a bad path is told, a failed query is an error state."""

from unittest import mock

import plotly.graph_objects as go
import pytest
from django.db import OperationalError

from hud.selectors_enablement import enabled_history_page
from tests.factories import FailedTestFactory
from tests.relay.enablement.scenario import backends, commit, job

pytestmark = pytest.mark.django_db


@pytest.fixture
def store():
    reference, backend = backends()
    before, broke = commit(10), commit(1)
    job(reference, broke.sha, {"test_ops": {"passed": 100}, "test/test_nn.py": {"passed": 50}})
    job(backend, before.sha, {"test/test_ops.py": {"passed": 70, "skipped": 5}})
    latest = job(backend, broke.sha, {"test/test_ops.py": {"passed": 60, "skipped": 17, "failed": 3}})
    FailedTestFactory(
        job_run=latest, outcome="xpassed", name="test_foo_xpu_float32", classname="test_ops.TestCommonXPU"
    )
    return reference, backend, before, broke


def test_the_table_shows_the_reference_first_and_each_cell_passed_of_ran_parity_and_trend(client, store):
    reference, backend, before, broke = store
    response = client.get("/crcr/enablement")
    html = response.content.decode()
    assert response.status_code == 200
    assert html.index('data-backend="pytorch/openreg-ci"') < html.index('data-backend="intel/torch-xpu-ops"')
    row = html[html.index('data-backend="intel/torch-xpu-ops"') :]
    eager = row[row.index('data-path="eager ops"') :]
    assert "<strong>60</strong> of 63" in eager[:800]
    assert "60.0 % of ref" in eager[:800]
    assert "▼ -10" in eager[:800]
    assert "/crcr/enablement/intel/torch-xpu-ops?path=eager%20ops" in eager[:800]


def test_the_drilldown_names_the_commit_a_module_started_skipping_and_the_unskip_candidates(client, store):
    reference, backend, before, broke = store
    html = client.get("/crcr/enablement/intel/torch-xpu-ops?path=eager+ops").content.decode()
    assert 'data-module="test_ops"' in html and 'data-module="test_nn"' not in html
    assert f'skipped +12 since <a class="mono" href="/commit/{broke.sha}">{broke.sha[:7]}' in html
    assert "test_ops.TestCommon.test_foo_float32" in html
    assert "100 of 100" in html, "the reference's counts beside the backend's"


def test_an_unknown_path_is_told_and_every_module_shown(client, store):
    html = client.get("/crcr/enablement/intel/torch-xpu-ops?path=quantum").content.decode()
    assert "No integration path is called" in html and 'data-module="test_ops"' in html


def test_an_unknown_backend_is_a_404(client, store):
    assert client.get("/crcr/enablement/acme/none").status_code == 404


def test_a_failed_query_is_an_error_state_not_an_empty_table(client, store):
    with mock.patch("hud.views_enablement.enablement_page", side_effect=OperationalError("database is locked")):
        response = client.get("/crcr/enablement")
    html = response.content.decode()
    assert response.status_code == 503 and "Could not load the enablement table" in html
    assert "database is locked" not in html


def test_the_backend_page_plots_enabled_tests_per_path(client, store):
    reference, backend, before, broke = store
    html = client.get("/crcr/intel/torch-xpu-ops").content.decode()
    assert 'id="figure-enabled"' in html and "plotly-basic" in html
    figure = enabled_history_page(backend).figure
    go.Figure(figure)  # plotly's own validation
    (trace,) = figure["data"]
    assert (trace["name"], trace["y"]) == ("eager ops", [70, 60])


def test_a_backend_page_without_counts_says_how_to_send_them(client, db):
    backends()
    html = client.get("/crcr/intel/torch-xpu-ops").content.decode()
    assert "No counts per test module" in html and 'id="figure-enabled"' not in html
