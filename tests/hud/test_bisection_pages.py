"""A verified culprit is shown where the question is asked: its commit page, the backend page, the
test page and the page of the upstream PR that landed it, in the sentence the API gives; a
culprit that did not reproduce reads so, and a commit no bisection named says nothing."""

from urllib.parse import quote

import pytest

from relay.models import Bisection
from relay.teststore.store import store_sweep
from tests.relay.bisect.conftest import run_to_the_end
from tests.relay.teststore.conftest import ADD, named, ran, world  # noqa: F401 - the fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]


def bisected(world, culprit_fails_again=True):  # noqa: F811
    commits = world["commits"]
    bisection = Bisection.objects.create(
        project=world["xpu"],
        good_sha=commits[0].sha,
        bad_sha=commits[3].sha,
        commits=[c.sha for c in commits[1:]],
        tests=[{"test_id": ADD, "job": "ci / test"}],
        bad_index=3,
    )
    again = None if culprit_fails_again else (lambda probe, honest: honest and probe.role == "search")
    return run_to_the_end(bisection, 2, verdict=again)


def pr_of(commit) -> int:
    return int(commit.title.rsplit("(#", 1)[1].rstrip(")"))


def test_the_culprit_s_commit_page_says_verified_culprit_with_the_range_and_runs(client, world):  # noqa: F811
    bisected(world)
    body = client.get(f"/commit/{world['commits'][2].sha}").content.decode()
    assert "✓ verified culprit" in body
    assert (
        "verified culprit of test_add_float32 on Intel XPU (by Intel XPU&#x27;s own probes at L4),"
        " bisected over 3 commits in 2 runs (+2 to verify)"
    ) in body


def test_the_backend_page_test_page_and_pr_page_say_the_same(client, world):  # noqa: F811
    found = bisected(world)
    sentence = "verified culprit of test_add_float32 on Intel XPU"
    pages = [
        "/crcr/intel/torch-xpu-ops",
        "/test/" + quote(ADD, safe=""),
        f"/pr/{pr_of(world['commits'][2])}",
    ]
    for path in pages:
        response = client.get(path)
        body = response.content.decode()
        assert response.status_code == 200, path
        assert sentence in body and f'data-bisection="{found.pk}"' in body, path


def test_a_culprit_that_did_not_reproduce_names_no_culprit_anywhere(client, world):  # noqa: F811
    """Issue 50 item 4: its suspect's commit and PR pages accuse nobody; the failing commit's page
    says the bisection did not reproduce, and nothing calls the test flaky."""
    bisected(world, culprit_fails_again=False)
    suspect = world["commits"][2]
    body = client.get(f"/commit/{suspect.sha}").content.decode()
    assert "culprit of" not in body and "Culprit" not in body
    pr = client.get(f"/pr/{pr_of(suspect)}").content.decode()
    assert "Culprit of a backend" not in pr and "culprit of" not in pr
    failing = client.get(f"/commit/{world['commits'][3].sha}").content.decode()
    assert "? not reproducible" in failing and "not reproducible, no culprit named" in failing
    test_page = client.get("/test/" + quote(ADD, safe="")).content.decode()
    assert "likely flaky" not in test_page and "not reproducible, no culprit named" in test_page


def test_a_commit_no_bisection_named_or_probed_shows_none(client, world):  # noqa: F811
    bisected(world)
    assert "bisection" not in client.get(f"/commit/{world['commits'][0].sha}").content.decode().lower()


def test_since_which_commit_names_the_bisected_culprit_beside_the_suspects_and_the_api_says_so(client, world):  # noqa: F811
    from relay.models import UpstreamCommit

    newest = UpstreamCommit.objects.create(sha="e" * 40, is_trunk=True, title="change (#160001)")
    ran(world["reference"], newest)
    ran(world["xpu"], newest, "failure", [named("XPU", "xpu")])
    store_sweep()
    commits = world["commits"]
    bisection = Bisection.objects.create(
        project=world["xpu"],
        good_sha=commits[1].sha,
        bad_sha=newest.sha,
        commits=[newest.sha],
        tests=[{"test_id": ADD, "job": "ci / test"}],
        state="verified",
        culprit_sha=newest.sha,
        bad_index=1,
    )
    body = client.get("/crcr/intel/torch-xpu-ops").content.decode()
    assert f'class="bisected" data-bisection="{bisection.pk}" data-state="verified"' in body
    streaks = client.get("/api/v1/culprits", {"backend": "intel/torch-xpu-ops"}).json()["streaks"]
    (add,) = [s for s in streaks if s["subject"] == ADD]
    assert add["bisection"] == {"id": bisection.pk, "state": "verified", "culprit": newest.sha, "verified": True}


def test_an_l2_backend_s_culprit_stays_off_the_upstream_pr_page_and_says_whose_word_it_is(client, world):  # noqa: F811
    """Issue 52 item 9: below L3 a verified culprit is the backend's own word: on its pages, named
    as such, never on the upstream author's PR page."""
    world["xpu"].level = "L2"
    world["xpu"].save()
    bisected(world)
    pr = client.get(f"/pr/{pr_of(world['commits'][2])}").content.decode()
    assert "verified culprit of" not in pr
    backend = client.get("/crcr/intel/torch-xpu-ops").content.decode()
    assert "verified culprit of test_add_float32 on Intel XPU (by Intel XPU&#x27;s own probes at L2)" in backend


def test_the_level_a_culprit_was_verified_at_is_the_one_said_after_a_promotion(client, world):  # noqa: F811
    """Promoted to L4 after its L2 probes verified a culprit: the culprit stays an L2 word."""
    from datetime import timedelta

    from django.utils import timezone

    from relay.models import LevelChange

    world["xpu"].level = "L2"
    world["xpu"].save()
    found = bisected(world)
    world["xpu"].level = "L4"
    world["xpu"].save()
    LevelChange.objects.create(
        project=world["xpu"],
        from_level="L2",
        to_level="L4",
        changed_by="admin",
        changed_at=timezone.now() + timedelta(minutes=1),
    )
    assert "verified culprit of" not in client.get(f"/pr/{pr_of(world['commits'][2])}").content.decode()
    body = client.get(f"/api/v1/bisections/{found.pk}").json()
    assert body["result"]["verified_by"]["level"] == "L2" and body["result"]["upstream_trusted"] is False
