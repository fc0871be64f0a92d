"""/relay/deliveries, /healthz and the admin re-dispatch action."""

import pytest

from relay.models import Dispatch
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db


def test_deliveries_lists_dispatches_and_attempts(admin_client):
    client = admin_client
    dispatch = DispatchFactory(state="retrying", last_error="GitHub 502: Bad Gateway")
    dispatch.attempt_log.create(number=1, outcome="transient", status_code=502)
    page = client.get("/relay/deliveries").content.decode()
    assert dispatch.delivery.guid in page and "HTTP 502" in page and "retrying" in page


def test_deliveries_filters_live_in_the_url(admin_client):
    client = admin_client
    DispatchFactory(delivery__event="push", delivery__action="")
    DispatchFactory(state="failed")
    page = client.get("/relay/deliveries?status=failing").content.decode()
    assert page.count('<tr id="delivery-') == 1
    assert 'value="failing" selected' in page


def test_deliveries_says_when_nothing_matches(admin_client):
    client = admin_client
    assert "No deliveries match these filters" in client.get("/relay/deliveries?event=push").content.decode()


def test_deliveries_refresh_fragment_for_htmx(admin_client):
    client = admin_client
    DispatchFactory()
    fragment = client.get("/relay/deliveries", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in fragment and "deliveries" in fragment


def test_healthz_reports_each_dependency(client):
    body = client.get("/healthz").json()
    assert set(body["checks"]) == {"database", "cache", "broker", "worker"}
    assert body["checks"]["database"]["ok"] is True
    assert body["status"] in ("ok", "degraded")


def test_healthz_is_degraded_not_ok_without_a_worker_heartbeat(client):
    body = client.get("/healthz").json()
    assert body["checks"]["worker"]["ok"] is False and body["status"] == "degraded"


def test_admin_redispatches_a_delivery_to_chosen_repos(admin_client, django_capture_on_commit_callbacks):
    dispatch = DispatchFactory(state="failed")
    other = ProjectFactory()
    data = {
        "action": "redispatch",
        "_selected_action": [dispatch.delivery.pk],
        "apply": "1",
        "projects": [dispatch.project.pk, other.pk],
    }
    response = admin_client.post("/admin/relay/delivery/", data)
    assert response.status_code == 302
    states = dict(Dispatch.objects.values_list("project_id", "state"))
    assert states == {dispatch.project.pk: "pending", other.pk: "pending"}


@pytest.mark.parametrize("path", ["/github/webhook", "/github/callback", "/github/callback/"])
def test_a_wrong_method_on_the_github_endpoints_is_a_json_405(client, path):
    response = client.get(path)
    assert response.status_code == 405 and response.json() == {"detail": "Method not allowed"}
