import threading
import time

from .conftest import DOWNSTREAM

URL = f"/repos/{DOWNSTREAM}/dispatches"
BODY = {"event_type": "push"}


def test_it_fails_once_then_answers_normally(gh, api, downstream_token):
    gh.fail("POST", r"/repos/.+/dispatches", status=500)
    first = api.post(URL, json=BODY, headers=downstream_token)
    assert first.status_code == 500
    assert first.json()["documentation_url"] == "https://docs.github.com/rest"
    assert api.post(URL, json=BODY, headers=downstream_token).status_code == 204
    assert [r.status for r in gh.requests("POST", r"/repos/.+/dispatches")] == [500, 204]
    assert len(gh.dispatches) == 1


def test_it_sends_retry_after_for_a_secondary_limit(gh, api, downstream_token):
    gh.fail("POST", URL, status=429, retry_after=7)
    response = api.post(URL, json=BODY, headers=downstream_token)
    assert (response.status_code, response.headers["retry-after"]) == (429, "7")
    assert "secondary rate limit" in response.json()["message"]


def test_it_emulates_an_exhausted_primary_limit(gh, api, downstream_token):
    gh.fail("POST", URL, status=403)
    response = api.post(URL, json=BODY, headers=downstream_token)
    assert response.status_code == 403
    assert response.headers["x-ratelimit-remaining"] == "0"
    assert int(response.headers["x-ratelimit-reset"]) > time.time()
    assert "retry-after" not in response.headers
    assert response.json()["message"] == "API rate limit exceeded for installation ID 11."


def test_it_only_faults_matching_methods_and_whole_paths(gh, api, downstream_token):
    gh.fail("GET", URL)
    gh.fail("POST", r"/repos/intel")
    assert api.post(URL, json=BODY, headers=downstream_token).status_code == 204


def test_it_keeps_failing_until_cleared_when_times_is_none(gh, api, downstream_token):
    gh.fail(None, URL, status=502, times=None)
    assert [api.post(URL, json=BODY, headers=downstream_token).status_code for _ in range(3)] == [502] * 3
    gh.clear_faults()
    assert api.post(URL, json=BODY, headers=downstream_token).status_code == 204


def test_it_delays_a_faulted_response(gh, api, downstream_token):
    gh.fail("POST", URL, status=503, delay=0.3)
    started = time.monotonic()
    assert api.post(URL, json=BODY, headers=downstream_token).status_code == 503
    assert time.monotonic() - started >= 0.3


def test_it_can_be_slow_but_otherwise_normal(gh, api, downstream_token):
    gh.fail("POST", URL, status=None, delay=0.3)
    started = time.monotonic()
    assert api.post(URL, json=BODY, headers=downstream_token).status_code == 204
    assert time.monotonic() - started >= 0.3


def test_it_answers_a_custom_fault_body_and_headers(gh, api, downstream_token):
    gh.fail("POST", URL, status=502, body="<html>bad gateway</html>", headers={"content-type": "text/html"})
    response = api.post(URL, json=BODY, headers=downstream_token)
    assert (response.status_code, response.text) == (502, "<html>bad gateway</html>")
    assert response.headers["content-type"] == "text/html"


def test_it_adds_latency_to_every_response(gh, api, downstream_token):
    gh.set_latency(0.1)
    started = time.monotonic()
    for _ in range(3):
        api.post(URL, json=BODY, headers=downstream_token)
    assert time.monotonic() - started >= 0.3


def test_slow_requests_do_not_block_others(gh, api, downstream_token):
    gh.fail("POST", URL, status=None, delay=0.6)
    slow = threading.Thread(target=api.post, args=(URL,), kwargs={"json": BODY, "headers": downstream_token})
    slow.start()
    time.sleep(0.05)
    started = time.monotonic()
    assert api.get("/rate_limit").status_code == 200
    assert time.monotonic() - started < 0.3
    slow.join()


def test_reset_forgets_activity_but_keeps_repos_and_tokens(gh, api, downstream_token):
    gh.fail("POST", URL, status=500, times=None)
    gh.set_latency(0.2)
    api.post(URL, json=BODY, headers=downstream_token)
    gh.reset()
    assert (gh.journal, gh.dispatches) == ([], [])
    started = time.monotonic()
    assert api.post(URL, json=BODY, headers=downstream_token).status_code == 204
    assert time.monotonic() - started < 0.2


def test_wait_for_polls_until_true_or_times_out(gh, api, downstream_token):
    assert gh.wait_for(lambda s: True, timeout=0.1)
    assert not gh.wait_for(lambda s: s.dispatches, timeout=0.1)
    api.post(URL, json=BODY, headers=downstream_token)
    assert gh.wait_for(lambda s: len(s.dispatches) == 1, timeout=1)
