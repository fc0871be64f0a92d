"""What every response shares: rate-limit headers, error bodies, API versions, routing."""

import http.client

import pytest

from devtools.standin import StandIn

from .conftest import DOWNSTREAM, app_jwt, bearer

RATE_HEADERS = (
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-used",
    "x-ratelimit-reset",
    "x-ratelimit-resource",
    "x-github-request-id",
)


def test_it_sends_rate_limit_headers_on_every_response(gh, api):
    for response in (api.get("/app", headers=bearer(app_jwt(gh))), api.get("/nowhere"), api.get("/app")):
        assert all(name in response.headers for name in RATE_HEADERS)
        assert response.headers["x-ratelimit-limit"] == "5000"
        assert response.headers["x-ratelimit-resource"] == "core"


def test_it_counts_calls_against_the_core_limit(gh, api):
    first = api.get("/app", headers=bearer(app_jwt(gh)))
    second = api.get("/app", headers=bearer(app_jwt(gh)))
    assert int(second.headers["x-ratelimit-used"]) == int(first.headers["x-ratelimit-used"]) + 1
    assert int(second.headers["x-ratelimit-remaining"]) == 5000 - int(second.headers["x-ratelimit-used"])


def test_it_answers_unknown_routes_with_githubs_404_body(api):
    response = api.get("/repos/a/b/nothing-here")
    assert response.status_code == 404
    assert response.json() == {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}


def test_it_answers_a_wrong_method_with_404(api):
    assert api.delete("/app").status_code == 404


def test_it_accepts_both_known_api_versions_and_none(gh, api):
    for version in ("2022-11-28", "2026-03-10"):
        response = api.get("/app", headers={**bearer(app_jwt(gh)), "X-GitHub-Api-Version": version})
        assert response.status_code == 200
    bare = api.build_request("GET", "/app", headers=bearer(app_jwt(gh)))
    del bare.headers["X-GitHub-Api-Version"]
    assert api.send(bare).status_code == 200


def test_it_rejects_an_unknown_api_version_with_400(gh, api):
    response = api.get("/app", headers={**bearer(app_jwt(gh)), "X-GitHub-Api-Version": "2021-01-01"})
    assert response.status_code == 400


def test_it_reports_the_rate_limit_without_spending_it(gh, api, downstream_token):
    body = api.get("/rate_limit", headers=downstream_token).json()
    assert set(body["resources"]["core"]) == {"limit", "remaining", "reset", "used", "resource"}
    again = api.get("/rate_limit", headers=downstream_token).json()
    assert again["resources"]["core"]["used"] == body["resources"]["core"]["used"]


def test_it_drops_the_legacy_rate_field_in_the_2026_api_version(api, downstream_token):
    body = api.get("/rate_limit", headers={**downstream_token, "X-GitHub-Api-Version": "2026-03-10"}).json()
    assert "rate" not in body


def test_it_journals_every_request_with_its_status(gh, api, downstream_token):
    api.post(f"/repos/{DOWNSTREAM}/dispatches?x=1", json={"event_type": "push"}, headers=downstream_token)
    entry = gh.requests("POST", r"/repos/.*/dispatches")[-1]
    assert (entry.status, entry.query, entry.json) == (204, {"x": "1"}, {"event_type": "push"})
    assert entry.headers["authorization"].startswith("token ghs_")
    assert entry.body == b'{"event_type":"push"}'
    assert gh.requests(method="GET", path="/app") == []


def test_it_keeps_the_connection_alive_between_calls_as_github_does(gh):
    host, port = gh.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("POST", "/nowhere", body=b'{"unread": true}', headers={"Content-Type": "application/json"})
    first = conn.getresponse()
    first.read()
    sock = conn.sock
    conn.request("GET", "/nowhere")
    second = conn.getresponse()
    assert second.status == 404 and second.read()
    assert sock is not None and conn.sock is sock, "the same connection answered both"
    conn.close()


def test_a_stopped_stand_in_hangs_up_the_connections_it_kept(app_key_pem):
    stand = StandIn(app_id=1001, app_private_key_pem=app_key_pem).start()
    host, port = stand.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/nowhere")
    conn.getresponse().read()
    stand.stop()
    with pytest.raises(ConnectionError):
        conn.request("GET", "/nowhere")
        conn.getresponse()
    conn.close()


def test_a_kept_connection_left_idle_is_closed_without_an_error_in_the_log(gh, monkeypatch, caplog):
    from devtools.standin import server

    monkeypatch.setattr(server._QuietHandler, "timeout", 0.2)
    host, port = gh.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/nowhere")
    conn.getresponse().read()
    assert gh.wait_for(lambda g: not g._server.standin_connections, timeout=5), "the idle connection was closed"
    conn.close()
    assert not [r for r in caplog.records if "timed out" in r.getMessage()]
