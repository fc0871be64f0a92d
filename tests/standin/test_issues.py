"""The stand-in's issues API in GitHub's shape: open, read, edit, close with a reason, reopen,
list by state; writes need the installation's issues permission on that repository."""

from .conftest import DOWNSTREAM, UPSTREAM


def test_it_opens_an_issue_as_the_bot_in_githubs_shape(api, downstream_token):
    response = api.post(
        f"/repos/{DOWNSTREAM}/issues", json={"title": "aten::_fft_c2c missing", "body": "b"}, headers=downstream_token
    )
    assert response.status_code == 201
    issue = response.json()
    assert (issue["number"], issue["state"], issue["state_reason"], issue["closed_at"]) == (1, "open", None, None)
    assert issue["user"]["login"] == "crcr-relay[bot]"
    assert issue["html_url"] == f"https://github.com/{DOWNSTREAM}/issues/1"
    assert issue["url"].endswith(f"/repos/{DOWNSTREAM}/issues/1")
    assert (
        api.get(f"/repos/{DOWNSTREAM}/issues/1", headers=downstream_token).json()["title"] == "aten::_fft_c2c missing"
    )


def test_it_edits_closes_with_a_reason_and_reopens(api, downstream_token):
    api.post(f"/repos/{DOWNSTREAM}/issues", json={"title": "t"}, headers=downstream_token)
    edited = api.patch(f"/repos/{DOWNSTREAM}/issues/1", json={"body": "grew"}, headers=downstream_token).json()
    assert (edited["body"], edited["state"]) == ("grew", "open")
    closed = api.patch(
        f"/repos/{DOWNSTREAM}/issues/1", json={"state": "closed", "state_reason": "completed"}, headers=downstream_token
    ).json()
    assert (closed["state"], closed["state_reason"]) == ("closed", "completed") and closed["closed_at"]
    reopened = api.patch(f"/repos/{DOWNSTREAM}/issues/1", json={"state": "open"}, headers=downstream_token).json()
    assert (reopened["state"], reopened["state_reason"], reopened["closed_at"]) == ("open", "reopened", None)


def test_it_lists_issues_by_state(api, downstream_token):
    for title in ("a", "b"):
        api.post(f"/repos/{DOWNSTREAM}/issues", json={"title": title}, headers=downstream_token)
    api.patch(f"/repos/{DOWNSTREAM}/issues/1", json={"state": "closed"}, headers=downstream_token)
    assert [i["title"] for i in api.get(f"/repos/{DOWNSTREAM}/issues", headers=downstream_token).json()] == ["b"]
    every = api.get(f"/repos/{DOWNSTREAM}/issues?state=all", headers=downstream_token).json()
    assert [i["number"] for i in every] == [2, 1]


def test_bad_input_is_githubs_422_and_a_missing_issue_404(api, downstream_token):
    missing = api.post(f"/repos/{DOWNSTREAM}/issues", json={"body": "no title"}, headers=downstream_token)
    assert (missing.status_code, missing.json()["message"]) == (422, "Validation Failed")
    assert missing.json()["errors"][0]["field"] == "title"
    api.post(f"/repos/{DOWNSTREAM}/issues", json={"title": "t"}, headers=downstream_token)
    bad = api.patch(f"/repos/{DOWNSTREAM}/issues/1", json={"state": "merged"}, headers=downstream_token)
    assert bad.status_code == 422
    assert api.get(f"/repos/{DOWNSTREAM}/issues/9", headers=downstream_token).status_code == 404


def test_a_token_of_another_installation_may_not_open_one(api, upstream_token):
    response = api.post(f"/repos/{DOWNSTREAM}/issues", json={"title": "t"}, headers=upstream_token)
    assert response.status_code in (403, 404)
    assert api.post(f"/repos/{UPSTREAM}/issues", json={"title": "t"}, headers=upstream_token).status_code == 201
