from .conftest import DOWNSTREAM, UPSTREAM


def test_it_reruns_a_workflow_run(gh, api, downstream_token):
    response = api.post(f"/repos/{DOWNSTREAM}/actions/runs/42/rerun", headers=downstream_token)
    assert (response.status_code, response.json()) == (201, {})
    api.post(f"/repos/{DOWNSTREAM}/actions/runs/43/rerun-failed-jobs", headers=downstream_token)
    assert [(r["repo"], r["run_id"], r["kind"]) for r in gh.reruns] == [
        (DOWNSTREAM, 42, "all"),
        (DOWNSTREAM, 43, "failed"),
    ]


def test_it_refuses_to_rerun_a_running_workflow(gh, api, downstream_token):
    gh.set_run_running(DOWNSTREAM, 42, True)
    response = api.post(f"/repos/{DOWNSTREAM}/actions/runs/42/rerun", headers=downstream_token)
    assert (response.status_code, response.json()["message"]) == (403, "This workflow is already running")
    gh.set_run_running(DOWNSTREAM, 42, False)
    assert api.post(f"/repos/{DOWNSTREAM}/actions/runs/42/rerun", headers=downstream_token).status_code == 201


def test_it_answers_404_when_rerunning_in_an_unknown_repo(api, downstream_token):
    assert api.post("/repos/nobody/nothing/actions/runs/1/rerun", headers=downstream_token).status_code == 404


def test_it_creates_an_issue_comment_as_the_bot(gh, api, upstream_token):
    response = api.post(f"/repos/{UPSTREAM}/issues/5/comments", json={"body": "hello"}, headers=upstream_token)
    assert response.status_code == 201
    comment = response.json()
    assert comment["user"] == {**comment["user"], "login": "crcr-relay[bot]", "type": "Bot"}
    assert comment["body"] == "hello"
    assert comment["html_url"].endswith(f"#issuecomment-{comment['id']}")
    [stored] = gh.comments
    assert (stored["repo"], stored["issue_number"], stored["body"]) == (UPSTREAM, 5, "hello")


def test_it_edits_an_issue_comment(gh, api, upstream_token):
    comment = api.post(f"/repos/{UPSTREAM}/issues/5/comments", json={"body": "v1"}, headers=upstream_token).json()
    response = api.patch(
        f"/repos/{UPSTREAM}/issues/comments/{comment['id']}", json={"body": "v2"}, headers=upstream_token
    )
    assert (response.status_code, response.json()["body"]) == (200, "v2")
    assert gh.comments[0]["body"] == "v2"
    assert (
        api.patch(f"/repos/{UPSTREAM}/issues/comments/1", json={"body": "x"}, headers=upstream_token).status_code == 404
    )


def test_it_rejects_a_comment_without_a_body(api, upstream_token):
    assert api.post(f"/repos/{UPSTREAM}/issues/5/comments", json={}, headers=upstream_token).status_code == 422


def test_it_lists_issue_comments_with_pagination(api, upstream_token):
    for text in ("a", "b", "c"):
        api.post(f"/repos/{UPSTREAM}/issues/5/comments", json={"body": text}, headers=upstream_token)
    api.post(f"/repos/{UPSTREAM}/issues/6/comments", json={"body": "elsewhere"}, headers=upstream_token)
    first = api.get(f"/repos/{UPSTREAM}/issues/5/comments?per_page=2", headers=upstream_token)
    assert [c["body"] for c in first.json()] == ["a", "b"]
    second = api.get(f"/repos/{UPSTREAM}/issues/5/comments?per_page=2&page=2", headers=upstream_token)
    assert [c["body"] for c in second.json()] == ["c"]
    assert 'rel="prev"' in second.headers["link"]
