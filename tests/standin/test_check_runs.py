import re

from .conftest import DOWNSTREAM, SHA, UPSTREAM

RUNS = f"/repos/{UPSTREAM}/check-runs"


def _create(api, headers, **body):
    return api.post(RUNS, json={"name": "crcr / xpu", "head_sha": SHA, **body}, headers=headers)


def test_it_creates_a_queued_check_run(gh, api, upstream_token):
    response = _create(api, upstream_token, external_id="dispatch-1")
    assert response.status_code == 201
    run = response.json()
    assert run["id"] > 2**31
    assert (run["status"], run["conclusion"], run["external_id"]) == ("queued", None, "dispatch-1")
    assert run["head_sha"] == SHA
    assert run["app"]["id"] == 1001
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", run["started_at"])
    assert run["output"]["annotations_count"] == 0
    assert run["url"] == f"{gh.url}{RUNS}/{run['id']}"
    assert gh.check_runs == [run]


def test_it_gives_increasing_ids_and_one_suite_per_sha(api, upstream_token):
    first, second = _create(api, upstream_token).json(), _create(api, upstream_token, name="other").json()
    assert second["id"] > first["id"]
    assert second["check_suite"]["id"] == first["check_suite"]["id"]


def test_a_conclusion_completes_the_run(api, upstream_token):
    run = _create(api, upstream_token, status="in_progress", conclusion="success").json()
    assert (run["status"], run["conclusion"]) == ("completed", "success")
    assert run["completed_at"]


def _rejected(response) -> str:
    assert response.status_code == 422, response.text
    return response.json()["message"]


def test_it_rejects_a_missing_name_or_head_sha(api, upstream_token):
    _rejected(api.post(RUNS, json={"head_sha": SHA}, headers=upstream_token))
    _rejected(api.post(RUNS, json={"name": "x"}, headers=upstream_token))


def test_it_rejects_an_unknown_status_or_conclusion(api, upstream_token):
    _rejected(_create(api, upstream_token, status="running"))
    _rejected(_create(api, upstream_token, conclusion="passed"))


def test_it_rejects_completed_without_a_conclusion(api, upstream_token):
    assert "conclusion" in _rejected(_create(api, upstream_token, status="completed"))


def test_it_rejects_a_summary_over_65535_characters(api, upstream_token):
    _rejected(_create(api, upstream_token, output={"title": "t", "summary": "x" * 65536}))
    assert _create(api, upstream_token, output={"title": "t", "summary": "x" * 65535}).status_code == 201


def test_it_rejects_a_head_sha_that_is_not_a_sha(api, upstream_token):
    assert _rejected(_create(api, upstream_token, head_sha="main")) == "No commit found for SHA: main"


def test_it_rejects_an_unknown_head_sha_once_commits_are_registered(gh, api, upstream_token):
    gh.add_commit(UPSTREAM, SHA)
    assert _create(api, upstream_token).status_code == 201
    assert _rejected(_create(api, upstream_token, head_sha="c" * 40)) == f"No commit found for SHA: {'c' * 40}"


def test_it_answers_403_for_a_repo_outside_the_installation(api, downstream_token):
    response = _create(api, downstream_token)
    assert response.status_code == 403
    assert response.json()["message"] == "Resource not accessible by integration"


def test_it_updates_a_check_run(gh, api, upstream_token):
    run = _create(api, upstream_token).json()
    body = {"status": "completed", "conclusion": "failure", "output": {"title": "1 failed", "summary": "see logs"}}
    response = api.patch(f"{RUNS}/{run['id']}", json=body, headers=upstream_token)
    assert response.status_code == 200
    updated = response.json()
    assert (updated["status"], updated["conclusion"], updated["output"]["title"]) == (
        "completed",
        "failure",
        "1 failed",
    )
    assert gh.check_runs[0]["conclusion"] == "failure"


def test_it_applies_the_same_rules_to_updates(api, upstream_token):
    run = _create(api, upstream_token).json()
    _rejected(api.patch(f"{RUNS}/{run['id']}", json={"status": "completed"}, headers=upstream_token))
    _rejected(api.patch(f"{RUNS}/{run['id']}", json={"conclusion": "great"}, headers=upstream_token))


def test_it_answers_404_when_updating_an_unknown_run(api, upstream_token):
    assert api.patch(f"{RUNS}/12345", json={"status": "in_progress"}, headers=upstream_token).status_code == 404


def test_it_reads_a_check_run_back(api, upstream_token):
    run = _create(api, upstream_token).json()
    assert api.get(f"{RUNS}/{run['id']}", headers=upstream_token).json() == run


def test_it_lists_the_latest_runs_for_a_ref_by_name(api, upstream_token):
    _create(api, upstream_token, name="a")
    newer = _create(api, upstream_token, name="a").json()
    _create(api, upstream_token, name="b")
    body = api.get(f"/repos/{UPSTREAM}/commits/{SHA}/check-runs?check_name=a", headers=upstream_token).json()
    assert body["total_count"] == 1
    assert body["check_runs"][0]["id"] == newer["id"]
    every = api.get(f"/repos/{UPSTREAM}/commits/{SHA}/check-runs?filter=all", headers=upstream_token).json()
    assert every["total_count"] == 3


def test_it_paginates_runs_for_a_ref(api, upstream_token):
    for number in range(3):
        _create(api, upstream_token, name=f"run {number}")
    response = api.get(f"/repos/{UPSTREAM}/commits/{SHA}/check-runs?per_page=2", headers=upstream_token)
    assert (response.json()["total_count"], len(response.json()["check_runs"])) == (3, 2)
    assert 'rel="next"' in response.headers["link"]


def test_it_lists_runs_of_a_check_suite(api, upstream_token):
    run = _create(api, upstream_token).json()
    body = api.get(
        f"/repos/{UPSTREAM}/check-suites/{run['check_suite']['id']}/check-runs", headers=upstream_token
    ).json()
    assert [r["id"] for r in body["check_runs"]] == [run["id"]]
    assert api.get(f"/repos/{UPSTREAM}/check-suites/1/check-runs", headers=upstream_token).status_code == 404


def test_it_accepts_a_rerequest(api, upstream_token):
    run = _create(api, upstream_token).json()
    assert api.post(f"{RUNS}/{run['id']}/rerequest", headers=upstream_token).status_code == 201


def test_it_links_same_repo_pull_requests_but_not_forks(gh, api, upstream_token):
    gh.add_pull(UPSTREAM, number=5, head_sha=SHA)
    gh.add_pull(UPSTREAM, number=6, head_sha=SHA, head_repo="someone/pytorch")
    run = _create(api, upstream_token).json()
    assert [pr["number"] for pr in run["pull_requests"]] == [5]


def test_it_keeps_runs_per_repository(api, upstream_token, downstream_token):
    run = _create(api, upstream_token).json()
    assert api.get(f"/repos/{DOWNSTREAM}/check-runs/{run['id']}", headers=downstream_token).status_code == 404


def test_a_stand_in_started_again_never_gives_an_id_its_previous_run_gave(app_key_pem, monkeypatch):
    # `make run` again on the same database: the relay still holds the last run's check-run ids.
    from devtools.standin import state
    from devtools.standin.actions import ActionsWorld

    clock = [1_780_000_000 * 10**9]
    monkeypatch.setattr(state.time, "time_ns", lambda: clock[0])
    before, before_actions = state.World(1001, app_key_pem), ActionsWorld()
    given = [next(before.check_run_ids) for _ in range(999)] + [before_actions.new_id() for _ in range(999)]
    clock[0] += 10**6  # the next process, a millisecond later
    after, after_actions = state.World(1001, app_key_pem), ActionsWorld()
    assert next(after.check_run_ids) > max(given[:999]) and after_actions.new_id() > max(given[999:])
    assert min(given) > 2**31
