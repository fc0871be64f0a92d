from .conftest import bearer, mint_token


def _installation_with(gh, count: int):
    gh.add_installation(installation_id=7, account="many")
    for number in range(count):
        gh.add_repo(f"many/repo{number}", repo_id=1000 + number, installation_id=7)


def test_it_lists_the_tokens_repositories(gh, api):
    _installation_with(gh, 2)
    body = api.get("/installation/repositories", headers=bearer(mint_token(api, gh, 7))).json()
    assert body["total_count"] == 2
    assert body["repository_selection"] == "selected"
    assert set(body["repositories"][0]) >= {"id", "node_id", "name", "full_name", "private"}


def test_it_paginates_repositories_with_next_and_last_links(gh, api):
    _installation_with(gh, 5)
    token = mint_token(api, gh, 7)
    first = api.get("/installation/repositories?per_page=2", headers=bearer(token))
    assert [r["id"] for r in first.json()["repositories"]] == [1000, 1001]
    links = first.headers["link"]
    assert f'<{gh.url}/installation/repositories?per_page=2&page=2>; rel="next"' in links
    assert f'<{gh.url}/installation/repositories?per_page=2&page=3>; rel="last"' in links


def test_it_follows_next_links_to_the_end(gh, api):
    _installation_with(gh, 5)
    token, url, seen = mint_token(api, gh, 7), "/installation/repositories?per_page=2", []
    while url:
        response = api.get(url, headers=bearer(token))
        seen += [r["id"] for r in response.json()["repositories"]]
        nexts = [p for p in response.headers.get("link", "").split(",") if 'rel="next"' in p]
        url = nexts[0].split(";")[0].strip(" <>") if nexts else None
    assert seen == [1000, 1001, 1002, 1003, 1004]


def test_it_sends_no_link_header_on_a_single_page(gh, api):
    _installation_with(gh, 2)
    assert "link" not in api.get("/installation/repositories", headers=bearer(mint_token(api, gh, 7))).headers


def test_it_rejects_an_unknown_installation_token(api):
    response = api.get("/installation/repositories", headers=bearer("ghs_" + "x" * 36))
    assert response.status_code == 401
    assert response.json()["message"] == "Bad credentials"
