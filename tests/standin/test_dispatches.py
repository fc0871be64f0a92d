import threading

from .conftest import DOWNSTREAM, UPSTREAM, bearer, mint_token

URL = f"/repos/{DOWNSTREAM}/dispatches"


def test_it_accepts_a_dispatch_with_204_and_records_it(gh, api, downstream_token):
    body = {"event_type": "pull_request", "client_payload": {"delivery_id": "d-1", "payload": {"n": 1}}}
    response = api.post(URL, json=body, headers=downstream_token)
    assert response.status_code == 204
    assert response.content == b""
    [dispatch] = gh.dispatches
    assert dispatch["repo"] == DOWNSTREAM
    assert (dispatch["event_type"], dispatch["client_payload"]) == ("pull_request", body["client_payload"])


def test_it_calls_dispatch_hooks_in_a_thread(gh, api, downstream_token):
    seen, done = [], threading.Event()
    gh.on_dispatch(lambda repo, event, payload: (seen.append((repo, event, payload)), done.set()))
    api.post(URL, json={"event_type": "push", "client_payload": {"a": 1}}, headers=downstream_token)
    assert done.wait(5)
    assert seen == [(DOWNSTREAM, "push", {"a": 1})]


def test_it_answers_404_for_a_repo_the_app_is_not_installed_on(gh, api, downstream_token):
    gh.add_repo("intel/not-installed", repo_id=9)
    response = api.post("/repos/intel/not-installed/dispatches", json={"event_type": "push"}, headers=downstream_token)
    assert response.status_code == 404
    assert gh.dispatches == []


def test_it_answers_404_for_a_repo_of_another_installation(api, downstream_token):
    assert (
        api.post(f"/repos/{UPSTREAM}/dispatches", json={"event_type": "push"}, headers=downstream_token).status_code
        == 404
    )


def test_it_answers_404_for_an_unknown_repo(api, downstream_token):
    assert (
        api.post("/repos/nobody/nothing/dispatches", json={"event_type": "push"}, headers=downstream_token).status_code
        == 404
    )


def test_it_needs_contents_write(gh, api, installed):
    token = mint_token(api, gh, 11, permissions={"contents": "read"})
    assert api.post(URL, json={"event_type": "push"}, headers=bearer(token)).status_code == 403


def _rejected(api, headers, body) -> str:
    response = api.post(URL, json=body, headers=headers)
    assert response.status_code == 422, response.text
    return response.json()["message"]


def test_it_rejects_a_missing_event_type(api, downstream_token):
    assert "event_type" in _rejected(api, downstream_token, {"client_payload": {}})


def test_it_rejects_an_empty_event_type(api, downstream_token):
    _rejected(api, downstream_token, {"event_type": ""})


def test_it_rejects_an_event_type_over_100_characters(api, downstream_token):
    _rejected(api, downstream_token, {"event_type": "x" * 101})
    assert api.post(URL, json={"event_type": "x" * 100}, headers=downstream_token).status_code == 204


def test_it_rejects_a_client_payload_that_is_not_an_object(api, downstream_token):
    message = _rejected(api, downstream_token, {"event_type": "push", "client_payload": "text"})
    assert "is not an object" in message


def test_it_rejects_more_than_ten_top_level_keys(api, downstream_token):
    _rejected(api, downstream_token, {"event_type": "push", "client_payload": {str(i): i for i in range(11)}})
    assert (
        api.post(
            URL, json={"event_type": "push", "client_payload": {str(i): i for i in range(10)}}, headers=downstream_token
        ).status_code
        == 204
    )


def test_it_rejects_a_client_payload_over_64_kb(api, downstream_token):
    padding = 65536 - len('{"k":""}')
    assert (
        api.post(
            URL, json={"event_type": "push", "client_payload": {"k": "x" * padding}}, headers=downstream_token
        ).status_code
        == 204
    )
    _rejected(api, downstream_token, {"event_type": "push", "client_payload": {"k": "x" * (padding + 1)}})


def test_it_rejects_a_body_that_is_not_json(api, downstream_token):
    response = api.post(URL, content=b"{nope", headers=downstream_token)
    assert response.status_code == 400
    assert response.json()["message"] == "Problems parsing JSON"


def test_it_requires_authentication(api, installed):
    assert api.post(URL, json={"event_type": "push"}).status_code == 401
