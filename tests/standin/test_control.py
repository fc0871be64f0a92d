"""The /_standin/ endpoints that sandbox mode and benchmarks use from other processes."""

import time

import jwt

from .conftest import DOWNSTREAM, SHA, UPSTREAM

DISPATCH = f"/repos/{DOWNSTREAM}/dispatches"


def test_it_seeds_installations_repos_and_commits_over_http(gh, api):
    assert api.post("/_standin/installations", json={"installation_id": 21, "account": "amd"}).status_code == 201
    assert (
        api.post("/_standin/repos", json={"full_name": "amd/rocm", "repo_id": 5, "installation_id": 21}).status_code
        == 201
    )
    body = {"repo": "amd/rocm", "sha": SHA, "parents": [], "message": "m", "author": "bob"}
    assert api.post("/_standin/commits", json=body).status_code == 201
    assert gh.world.repos["amd/rocm"]["installation_id"] == 21
    assert gh.world.resolve_sha(gh.world.repos["amd/rocm"], SHA[:8]) == SHA


def test_it_rejects_seeding_with_missing_or_unknown_fields(api):
    assert api.post("/_standin/repos", json={}).status_code == 400
    assert api.post("/_standin/repos", json={"full_name": "a/b", "colour": "red"}).status_code == 400


def test_it_serves_the_journal_incrementally(gh, api, downstream_token):
    api.post(DISPATCH, json={"event_type": "push"}, headers=downstream_token)
    first = api.get("/_standin/journal").json()
    api.get("/rate_limit")
    later = api.get(f"/_standin/journal?since={first['next']}").json()
    assert [r["path"] for r in later["requests"]] == ["/rate_limit"]
    assert later["requests"][0]["index"] == first["next"]
    assert later["next"] == first["next"] + 1
    assert first["requests"][-1]["json"] == {"event_type": "push"}


def test_control_requests_are_not_journalled(gh, api):
    api.get("/_standin/journal")
    assert gh.journal == []


def test_it_lists_dispatches_check_runs_and_comments(api, downstream_token, upstream_token):
    api.post(DISPATCH, json={"event_type": "push", "client_payload": {"a": 1}}, headers=downstream_token)
    api.post(f"/repos/{UPSTREAM}/check-runs", json={"name": "n", "head_sha": SHA}, headers=upstream_token)
    api.post(f"/repos/{UPSTREAM}/issues/1/comments", json={"body": "b"}, headers=upstream_token)
    assert api.get("/_standin/dispatches").json()[0]["client_payload"] == {"a": 1}
    assert api.get("/_standin/check-runs").json()[0]["name"] == "n"
    assert api.get("/_standin/comments").json()[0]["body"] == "b"


def test_it_adds_and_clears_faults(api, downstream_token):
    fault = {"method": "POST", "path": r"/repos/.+/dispatches", "status": 503, "times": None}
    assert api.post("/_standin/faults", json=fault).status_code == 201
    assert api.post(DISPATCH, json={"event_type": "push"}, headers=downstream_token).status_code == 503
    assert api.delete("/_standin/faults").status_code == 204
    assert api.post(DISPATCH, json={"event_type": "push"}, headers=downstream_token).status_code == 204


def test_a_fault_posted_without_times_fires_once(api, downstream_token):
    api.post("/_standin/faults", json={"method": "POST", "path": DISPATCH, "status": 429, "retry_after": 3})
    first = api.post(DISPATCH, json={"event_type": "push"}, headers=downstream_token)
    assert (first.status_code, first.headers["retry-after"]) == (429, "3")
    assert api.post(DISPATCH, json={"event_type": "push"}, headers=downstream_token).status_code == 204


def test_it_sets_latency(gh, api, downstream_token):
    assert api.post("/_standin/latency", json={"seconds": 0.2}).status_code == 200
    started = time.monotonic()
    api.post(DISPATCH, json={"event_type": "push"}, headers=downstream_token)
    assert time.monotonic() - started >= 0.2
    started = time.monotonic()
    api.get("/_standin/dispatches")
    assert time.monotonic() - started < 0.2  # control calls are never slowed


def test_it_mints_oidc_tokens_on_request(gh, api):
    body = {"kind": "buildkite", "claims": {"pipeline_slug": "xpu"}}
    token = api.post("/_standin/oidc/token", json=body).json()["value"]
    claims = jwt.decode(token, options={"verify_signature": False})
    assert (claims["iss"], claims["pipeline_slug"]) == (gh.oidc.issuer("buildkite"), "xpu")


def test_it_rejects_an_unknown_oidc_kind(api):
    assert api.post("/_standin/oidc/token", json={"kind": "jenkins"}).status_code == 400


def test_it_resets_over_http(gh, api, downstream_token):
    api.post(DISPATCH, json={"event_type": "push"}, headers=downstream_token)
    assert api.post("/_standin/reset").status_code == 204
    assert gh.dispatches == [] and gh.journal == []
