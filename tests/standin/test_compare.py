"""GET /repos/{o}/{r}/compare/{base}...{head} in GitHub's shape: the commits head has and base has
not, oldest first with their parents, status and counts, paged with a link header."""

from .conftest import UPSTREAM


def _chain(gh, n: int, parent: str | None = None, tag: str = "a") -> list[str]:
    shas = []
    for i in range(n):
        sha = f"{tag}{i:039x}"
        gh.add_commit(UPSTREAM, sha, parents=[parent] if parent else [], message=f"commit {i} (#{100 + i})")
        shas.append(sha)
        parent = sha
    return shas


def test_it_lists_the_commits_after_base_up_to_head_oldest_first(gh, api, upstream_token):
    shas = _chain(gh, 6)
    body = api.get(f"/repos/{UPSTREAM}/compare/{shas[1]}...{shas[5]}", headers=upstream_token).json()
    assert [c["sha"] for c in body["commits"]] == shas[2:]
    assert (body["status"], body["ahead_by"], body["behind_by"], body["total_commits"]) == ("ahead", 4, 0, 4)
    assert body["base_commit"]["sha"] == body["merge_base_commit"]["sha"] == shas[1]
    assert body["commits"][0]["parents"][0]["sha"] == shas[1]
    assert body["html_url"] == f"https://github.com/{UPSTREAM}/compare/{shas[1]}...{shas[5]}"


def test_a_merged_side_branch_is_listed_with_the_merge_s_second_parent(gh, api, upstream_token):
    trunk = _chain(gh, 3)
    side = _chain(gh, 2, parent=trunk[0], tag="b")
    merge = "c" * 40
    gh.add_commit(UPSTREAM, merge, parents=[trunk[2], side[1]], message="Merge")
    body = api.get(f"/repos/{UPSTREAM}/compare/{trunk[0]}...{merge}", headers=upstream_token).json()
    listed = [c["sha"] for c in body["commits"]]
    assert set(listed) == {*trunk[1:], *side, merge} and listed[-1] == merge
    assert [p["sha"] for p in body["commits"][-1]["parents"]] == [trunk[2], side[1]]


def test_head_behind_base_is_behind(gh, api, upstream_token):
    shas = _chain(gh, 3)
    body = api.get(f"/repos/{UPSTREAM}/compare/{shas[2]}...{shas[0]}", headers=upstream_token).json()
    assert (body["status"], body["ahead_by"], body["behind_by"], body["commits"]) == ("behind", 0, 2, [])


def test_it_pages_the_commits_with_a_link_header(gh, api, upstream_token):
    shas = _chain(gh, 8)
    response = api.get(f"/repos/{UPSTREAM}/compare/{shas[0]}...{shas[7]}?per_page=3", headers=upstream_token)
    assert [c["sha"] for c in response.json()["commits"]] == shas[1:4]
    assert 'rel="next"' in response.headers["link"]
    assert response.json()["total_commits"] == 7


def test_unknown_commits_or_a_range_without_three_dots_answer_404(gh, api, upstream_token):
    shas = _chain(gh, 2)
    assert api.get(f"/repos/{UPSTREAM}/compare/{shas[0]}...{'f' * 40}", headers=upstream_token).status_code == 404
    assert api.get(f"/repos/{UPSTREAM}/compare/{shas[0]}", headers=upstream_token).status_code == 404
