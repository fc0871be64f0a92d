"""The stand-in's Git refs, contents and pull-request routes: GitHub's shapes, status codes and
messages, behind the installation's contents and pull_requests permissions."""

import base64

from devtools.standin.git import blob_sha

from .conftest import UPSTREAM, mint_token

PATH = ".github/allowlist.yml"
BRANCH = "crcr-demotion/ROCm/pytorch"


def _seeded(gh) -> str:
    return gh.add_file(UPSTREAM, PATH, "L1: []\nL2: []\n", message="Add the allowlist")


def _branch(api, token, sha):
    return api.post(f"/repos/{UPSTREAM}/git/refs", headers=token, json={"ref": f"refs/heads/{BRANCH}", "sha": sha})


def _put(api, token, text, sha, branch=BRANCH):
    body = {"message": "move", "content": base64.b64encode(text.encode()).decode(), "sha": sha, "branch": branch}
    return api.put(f"/repos/{UPSTREAM}/contents/{PATH}", headers=token, json=body)


def test_a_branch_is_created_from_mains_head_and_read_back(installed, api, upstream_token):
    main = _seeded(installed)
    assert api.get(f"/repos/{UPSTREAM}/git/ref/heads/main", headers=upstream_token).json()["object"]["sha"] == main
    created = _branch(api, upstream_token, main)
    assert created.status_code == 201 and created.json()["ref"] == f"refs/heads/{BRANCH}"
    assert api.get(f"/repos/{UPSTREAM}/git/ref/heads/{BRANCH}", headers=upstream_token).json()["object"]["sha"] == main
    assert _branch(api, upstream_token, main).json()["message"] == "Reference already exists"
    assert api.get(f"/repos/{UPSTREAM}/git/ref/heads/nope", headers=upstream_token).status_code == 404


def test_a_file_reads_as_base64_with_gits_blob_sha(installed, api, upstream_token):
    _seeded(installed)
    body = api.get(f"/repos/{UPSTREAM}/contents/{PATH}?ref=main", headers=upstream_token).json()
    assert body["encoding"] == "base64" and base64.b64decode(body["content"]) == b"L1: []\nL2: []\n"
    assert body["sha"] == blob_sha(b"L1: []\nL2: []\n")
    assert api.get(f"/repos/{UPSTREAM}/contents/{PATH}?ref=nope", headers=upstream_token).status_code == 404


def test_replacing_a_file_needs_its_current_sha(installed, api, upstream_token):
    main = _seeded(installed)
    _branch(api, upstream_token, main)
    missing = _put(api, upstream_token, "L2: [a/b]\n", None)
    assert missing.status_code == 422 and '"sha" wasn\'t supplied' in missing.json()["message"]
    assert _put(api, upstream_token, "L2: [a/b]\n", "0" * 40).status_code == 409
    done = _put(api, upstream_token, "L2: [a/b]\n", blob_sha(b"L1: []\nL2: []\n"))
    assert done.status_code == 200 and done.json()["commit"]["parents"][0]["sha"] == main
    assert installed.file_text(UPSTREAM, PATH, BRANCH) == "L2: [a/b]\n"
    assert installed.file_text(UPSTREAM, PATH, "main") == "L1: []\nL2: []\n"


def test_a_branch_moves_only_forward_unless_forced_and_can_be_deleted(installed, api, upstream_token):
    main = _seeded(installed)
    _branch(api, upstream_token, main)
    _put(api, upstream_token, "L2: [a/b]\n", blob_sha(b"L1: []\nL2: []\n"))
    ref = f"/repos/{UPSTREAM}/git/refs/heads/{BRANCH}"
    assert (
        api.patch(ref, headers=upstream_token, json={"sha": main}).json()["message"] == "Update is not a fast forward"
    )
    assert api.patch(ref, headers=upstream_token, json={"sha": main, "force": True}).status_code == 200
    assert api.delete(ref, headers=upstream_token).status_code == 204
    assert api.delete(ref, headers=upstream_token).json()["message"] == "Reference does not exist"


def _pull(api, token, **extra):
    body = {"title": "[CRCR] Demote", "head": BRANCH, "base": "main", "body": "why", **extra}
    return api.post(f"/repos/{UPSTREAM}/pulls", headers=token, json=body)


def _branch_with_change(installed, api, token):
    main = _seeded(installed)
    _branch(api, token, main)
    _put(api, token, "L2: [a/b]\n", blob_sha(b"L1: []\nL2: []\n"))


def test_a_pull_request_is_opened_listed_by_head_and_only_once(installed, api, upstream_token):
    _branch_with_change(installed, api, upstream_token)
    opened = _pull(api, upstream_token)
    assert opened.status_code == 201
    pull = opened.json()
    assert pull["state"] == "open" and pull["head"]["ref"] == BRANCH and pull["body"] == "why"
    listed = api.get(f"/repos/{UPSTREAM}/pulls", headers=upstream_token, params={"head": f"pytorch:{BRANCH}"}).json()
    assert [p["number"] for p in listed] == [pull["number"]]
    again = _pull(api, upstream_token)
    assert again.status_code == 422 and again.json()["message"] == "Validation Failed"
    assert "A pull request already exists" in again.json()["errors"][0]["message"]


def test_a_pull_request_is_labelled_edited_and_closed(installed, api, upstream_token):
    _branch_with_change(installed, api, upstream_token)
    number = _pull(api, upstream_token).json()["number"]
    labels = api.post(f"/repos/{UPSTREAM}/issues/{number}/labels", headers=upstream_token, json={"labels": ["x"]})
    assert [label["name"] for label in labels.json()] == ["x"]
    edited = api.patch(
        f"/repos/{UPSTREAM}/pulls/{number}", headers=upstream_token, json={"body": "new", "state": "closed"}
    )
    assert edited.json()["body"] == "new" and edited.json()["state"] == "closed" and edited.json()["closed_at"]
    assert api.get(f"/repos/{UPSTREAM}/pulls", headers=upstream_token).json() == []


def test_a_merge_by_a_person_brings_the_change_to_main(installed, api, upstream_token):
    _branch_with_change(installed, api, upstream_token)
    number = _pull(api, upstream_token).json()["number"]
    assert installed.close_pull(UPSTREAM, number, merged=True)["merged"] is True
    assert installed.file_text(UPSTREAM, PATH, "main") == "L2: [a/b]\n"


def test_writes_need_the_installations_contents_and_pull_requests_permissions(installed, api):
    main = _seeded(installed)
    read_only = {"Authorization": f"token {mint_token(api, installed, 1, permissions={'contents': 'read'})}"}
    assert _branch(api, read_only, main).status_code == 403
    assert _pull(api, read_only).status_code == 403
    assert _put(api, read_only, "x", None).status_code == 403
