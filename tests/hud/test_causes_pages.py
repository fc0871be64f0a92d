"""The causes pages and the causes sections of the backend, commit and PR pages, over a world
failing through three causes (tests/relay/causes/conftest.py)."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import DatabaseError

from relay.models import FailureCause, KnownIssue
from tests.relay.causes.conftest import world_build

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(db):
    return world_build()


FFT_OP = "aten::_fft_c2c"


def test_the_causes_page_lists_each_cause_with_its_impact(client, world):
    response = client.get("/causes")
    body = response.content.decode()
    assert response.status_code == 200
    assert body.count('class="cause-link"') == 3
    assert FFT_OP in body and "missing operator" in body and "shared with the reference" in body


def test_the_causes_page_filters_by_what_the_url_says(client, world):
    body = client.get("/causes?backend=Ascend/pytorch").content.decode()
    assert body.count('class="cause-link"') == 1 and FFT_OP in body
    assert client.get("/causes?shared=yes").content.decode().count('class="cause-link"') == 1


@pytest.mark.parametrize("query", ["?colour=red", "?kind=nope", "?days=999", "?backend=no/such", "?sha=zz"])
def test_a_filter_the_page_cannot_read_is_a_400_that_says_why(client, world, query):
    response = client.get("/causes" + query)
    assert response.status_code == 400
    assert "Bad filter" in response.content.decode()


def test_a_cause_page_tells_its_story_with_a_trend_plot(client, world):
    cause = FailureCause.objects.get(kind="missing_operator")
    response = client.get(f"/causes/{cause.pk}")
    body = response.content.decode()
    assert response.status_code == 200
    assert "not seen on the reference" in body and "Intel XPU" in body and "Ascend NPU" in body
    figure = json.loads(body.split('id="figure-cause" type="application/json">')[1].split("</script>")[0])
    assert {trace["name"] for trace in figure["data"]} == {"intel/torch-xpu-ops", "Ascend/pytorch"}
    assert "plotly-basic.min.js" in body
    assert client.get("/causes/999999").status_code == 404


def test_the_cause_page_says_when_the_database_did_not_answer(client, world, monkeypatch):
    cause = FailureCause.objects.first()

    def down(*args, **kwargs):
        raise DatabaseError("down")

    monkeypatch.setattr("hud.views_causes.cause_page", down)
    assert client.get(f"/causes/{cause.pk}").status_code == 503


def test_the_backend_page_shows_top_causes_and_ranked_missing_operators(client, world):
    body = client.get("/crcr/intel/torch-xpu-ops").content.decode()
    assert "Top causes" in body and "Missing operators, by tests they fail" in body
    assert "#1</td>" in body and "not failing" in body


def test_the_commit_and_pr_pages_group_failures_by_cause(client, world):
    sha = world["commits"][0].sha
    body = client.get(f"/commit/{sha}").content.decode()
    assert "Failures by cause" in body
    section = body.split("Failures by cause")[1]
    assert section.index(FFT_OP) < section.index("Tensor-likes are not close!")  # five tests before two
    assert "the reference too" in section


def test_one_click_makes_the_suggested_known_issue_and_it_matches_by_cause(client, world):
    user = get_user_model().objects.create_user("triager")
    user.user_permissions.add(*Permission.objects.filter(codename="add_knownissue"))
    client.force_login(user)
    cause = FailureCause.objects.get(exception="IndexError")
    response = client.post(f"/causes/{cause.pk}/known-issue")
    issue = KnownIssue.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/known-issues/{issue.pk}"
    assert (issue.cause, issue.kind, issue.all_backends) == (cause.rule, "upstream", True)
    assert f"#{issue.pk}" in client.get(f"/causes/{cause.pk}").content.decode()


def test_making_a_known_issue_from_a_cause_needs_the_permission(client, world):
    cause = FailureCause.objects.first()
    client.force_login(get_user_model().objects.create_user("reader"))
    assert client.post(f"/causes/{cause.pk}/known-issue").status_code == 403
    assert not KnownIssue.objects.exists()


def test_the_trend_figure_is_valid_plotly(world):
    import plotly.graph_objects as go

    from hud.selectors_causes import cause_page

    figure = cause_page(FailureCause.objects.get(kind="missing_operator").pk)["figure"]
    go.Figure(figure)  # validates every property; raises on a wrong one
    assert figure["layout"]["barmode"] == "stack"
