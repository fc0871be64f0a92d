from .conftest import PARENT, SHA, UPSTREAM


def _seed(gh):
    gh.add_commit(UPSTREAM, SHA, parents=[PARENT], message="Fix the thing", author="alice")


def test_it_returns_a_commit_by_full_sha(gh, api, upstream_token):
    _seed(gh)
    body = api.get(f"/repos/{UPSTREAM}/commits/{SHA}", headers=upstream_token).json()
    assert body["sha"] == SHA
    assert body["parents"][0]["sha"] == PARENT
    assert body["commit"]["message"] == "Fix the thing"
    assert body["commit"]["author"]["name"] == "alice"
    assert body["author"]["login"] == "alice"
    assert body["html_url"] == f"https://github.com/{UPSTREAM}/commit/{SHA}"


def test_it_resolves_a_unique_prefix_of_seven_or_more(gh, api, upstream_token):
    _seed(gh)
    assert api.get(f"/repos/{UPSTREAM}/commits/{SHA[:7]}", headers=upstream_token).json()["sha"] == SHA
    assert api.get(f"/repos/{UPSTREAM}/commits/{SHA[:6]}", headers=upstream_token).status_code == 422


def test_it_answers_422_for_an_unknown_sha(gh, api, upstream_token):
    _seed(gh)
    response = api.get(f"/repos/{UPSTREAM}/commits/{'c' * 40}", headers=upstream_token)
    assert response.status_code == 422
    assert response.json()["message"] == f"No commit found for SHA: {'c' * 40}"


def test_it_answers_404_for_an_unknown_repo(api, upstream_token):
    assert api.get(f"/repos/nobody/nothing/commits/{SHA}", headers=upstream_token).status_code == 404


def test_it_answers_the_bare_sha_for_the_sha_media_type(gh, api, upstream_token):
    _seed(gh)
    response = api.get(
        f"/repos/{UPSTREAM}/commits/{SHA[:10]}", headers={**upstream_token, "Accept": "application/vnd.github.sha"}
    )
    assert response.status_code == 200
    assert response.text == SHA
    assert response.headers["content-type"].startswith("text/plain")


def test_it_returns_a_pull_request(gh, api, upstream_token):
    gh.add_pull(UPSTREAM, number=5, head_sha=SHA, labels=["ciflow/crcr/xpu"], state="open")
    body = api.get(f"/repos/{UPSTREAM}/pulls/5", headers=upstream_token).json()
    assert (body["number"], body["state"], body["draft"], body["merged"]) == (5, "open", False, False)
    assert body["head"]["sha"] == SHA
    assert body["base"]["repo"]["full_name"] == UPSTREAM
    assert [label["name"] for label in body["labels"]] == ["ciflow/crcr/xpu"]
    assert body["user"]["login"]


def test_it_answers_404_for_an_unknown_pull_request(api, upstream_token):
    assert api.get(f"/repos/{UPSTREAM}/pulls/999", headers=upstream_token).status_code == 404


def test_it_hides_private_repos_from_tokens_of_other_installations(gh, api, downstream_token):
    gh.add_repo("secret/repo", repo_id=77, private=True)
    gh.add_commit("secret/repo", SHA)
    assert api.get(f"/repos/secret/repo/commits/{SHA}", headers=downstream_token).status_code == 404
