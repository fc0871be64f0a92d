"""The top bar's search box: a PR number, a SHA prefix or a backend name goes there; several
matches are listed; nothing matching is a 404 page that says what it tried."""

from unittest import mock

import pytest
from django.db import OperationalError

from tests.factories import JobRunFactory, UpstreamCommitFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "query, destination",
    [
        ("100", "/pr/100"),
        ("#100", "/pr/100"),
        ("PR #100", "/pr/100"),
        ("aaaaaaa", "/commit/" + "a" * 40),
        ("AAAAAAAAAAAA", "/commit/" + "a" * 40),
        ("intel/torch-xpu-ops", "/crcr/intel/torch-xpu-ops"),
        ("Intel XPU", "/crcr/intel/torch-xpu-ops"),
        ("rocm", "/crcr/ROCm/pytorch"),
        ("  sglang ", "/crcr/sgl-project/sglang"),
    ],
)
def test_one_match_goes_straight_there(client, world, query, destination):
    response = client.get("/search", {"q": query})
    assert response.status_code == 302 and response["Location"] == destination


def test_a_sha_known_only_from_job_results_is_found(client, world):
    JobRunFactory(project=world["xpu"], head_sha="d" * 40)
    assert client.get("/search", {"q": "dddd"})["Location"] == "/commit/" + "d" * 40


def test_several_commits_sharing_a_prefix_are_listed(client, world):
    UpstreamCommitFactory(sha="abcd" + "1" * 36, title="First of two")
    UpstreamCommitFactory(sha="abcd" + "2" * 36, title="Second of two")
    response = client.get("/search", {"q": "abcd"})
    page = response.content.decode()
    assert response.status_code == 200 and "Several matches" in page
    assert 'href="/commit/abcd1111' in page and 'href="/commit/abcd2222' in page and "Second of two" in page


def test_several_backends_matching_a_word_are_listed(client, world):
    page = client.get("/search", {"q": "pytorch"}).content.decode()
    assert 'href="/crcr/ROCm/pytorch"' in page and 'href="/crcr/pytorch/openreg-ci"' in page


@pytest.mark.parametrize("query", ["no-such-backend", "99999", "fedcba9"])
def test_nothing_matching_is_a_404_that_says_what_search_takes(client, world, query):
    response = client.get("/search", {"q": query})
    page = response.content.decode()
    assert response.status_code == 404 and f"Nothing matches <code>{query}</code>" in page
    assert "PR number" in page and "SHA" in page and "backend" in page


def test_an_unknown_pr_number_links_to_github(client, world):
    page = client.get("/search", {"q": "#4242"}).content.decode()
    assert (
        "no webhook, dispatch or result for PR #4242" in page and "https://github.com/pytorch/pytorch/pull/4242" in page
    )


def test_an_empty_search_explains_itself_and_an_overlong_one_is_a_400(client, world):
    assert "Type a PR number" in client.get("/search").content.decode()
    response = client.get("/search", {"q": "x" * 500})
    assert response.status_code == 400 and "500 characters long" in response.content.decode()


def test_a_failed_search_query_is_an_error_not_nothing_found(client, world):
    with mock.patch("hud.selectors_search.pr_known", side_effect=OperationalError("database is locked")):
        response = client.get("/search", {"q": "100"})
    assert response.status_code == 503 and "not an empty result" in response.content.decode()


def test_hostile_queries_are_escaped(client, world):
    page = client.get("/search", {"q": "<script>alert(1)</script>"}).content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page


def test_every_page_has_the_search_box_and_keeps_the_query_on_the_results(client, world):
    assert (
        'role="search"' in client.get("/").content.decode() and 'role="search"' in client.get("/crcr").content.decode()
    )
    assert 'value="no-such-backend"' in client.get("/search", {"q": "no-such-backend"}).content.decode()


def test_a_pr_authors_login_finds_their_prs(client, world):
    from relay.models import PullRequest

    PullRequest.objects.create(number=170001, title="[inductor] Fuse epilogues", author="ezyang")
    PullRequest.objects.create(number=170002, title="[dynamo] Graph-break on send", author="ezyang")
    page = client.get("/search", {"q": "@EZYang"})
    assert page.status_code == 200
    html = page.content.decode()
    assert 'href="/pr/170001"' in html and 'href="/pr/170002"' in html


def test_words_of_a_title_find_the_pr_and_the_trunk_commit(client, world):
    from relay.models import PullRequest

    PullRequest.objects.create(number=170003, title="[MPS] Implement index_fill for complex", author="kulinseth")
    assert client.get("/search", {"q": "index_fill"})["Location"] == "/pr/170003"
    # the world's one trunk commit titled "Fix the add kernel (#100)" is the one match: straight there
    assert client.get("/search", {"q": "add kernel"})["Location"] == "/commit/" + "a" * 40
    PullRequest.objects.create(number=100, title="Fix the add kernel", author="ezyang")
    html = client.get("/search", {"q": "add kernel"}).content.decode()
    assert "Trunk commits titled" in html and 'href="/commit/' + "a" * 40 + '"' in html and 'href="/pr/100"' in html
