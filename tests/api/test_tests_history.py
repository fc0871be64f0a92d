"""GET /api/v1/tests/<identity>/history: the same history as the page, cursor-paginated."""

from urllib.parse import quote

import pytest

from tests.relay.teststore.conftest import ADD, MUL, named, ran, world  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def get(client, identity, **params):
    return client.get(f"/api/v1/tests/{quote(identity, safe='')}/history", params)


def test_it_answers_the_history_with_the_reference_first(client, world):  # noqa: F811
    body = get(client, ADD).json()
    assert body["test_id"] == ADD and (body["module"], body["method"], body["dtypes"]) == (
        "test_ops",
        "test_add",
        "float32",
    )
    assert [b["backend"] for b in body["backends"]][0] == "pytorch/openreg-ci"
    newest = body["commits"][0]
    assert [(c["outcome"], c["mark"]) for c in newest["cells"]] == [("failed", "shared")] * 3
    assert body["commits"][-1]["cells"][0] == {
        **body["commits"][-1]["cells"][0],
        "outcome": "passed",
        "inferred": True,
    }
    assert {b["first_failing"] for b in body["backends"]} == {world["commits"][2].sha}


def test_it_pages_with_next_until_the_oldest_commit(client, world):  # noqa: F811
    first = get(client, ADD, limit=3).json()
    assert len(first["commits"]) == 3 and first["next"]
    older = client.get(first["next"]).json()
    assert len(older["commits"]) == 1 and older["next"] is None


def test_the_flaky_state_and_retry_counts_are_in_the_backends(client, world):  # noqa: F811
    xpu = next(b for b in get(client, MUL).json()["backends"] if b["backend"] == "intel/torch-xpu-ops")
    assert (xpu["state"], xpu["pass_on_retry"], xpu["fail_on_retry"]) == ("flaky", 1, 0)


def test_an_unknown_test_is_404_and_a_bad_cursor_400(client, world):  # noqa: F811
    assert get(client, "nope.Test.test_nope").status_code == 404
    assert get(client, ADD, after="@@@").status_code == 400


def test_during_the_store_s_lag_the_api_answers_the_failure_the_page_shows(client, world):  # noqa: F811
    """Issue 50 item 11: a test's first failure, not yet written by the store's minute sweep, is on
    the test page and in the API alike (one selector), not a 404 from either."""
    from relay.models import TestIdentity, UpstreamCommit

    newest = UpstreamCommit.objects.create(sha="e" * 40, is_trunk=True, title="change (#160001)")
    ran(world["reference"], newest)
    ran(world["xpu"], newest, "failure", [named("XPU", "xpu", "test_div")])
    test = "test_ops.TestFoo.test_div_float32"
    assert not TestIdentity.objects.filter(identity=test).exists()
    page = client.get("/test/" + quote(test, safe=""))
    api = client.get(f"/api/v1/tests/{quote(test, safe='')}/history")
    assert page.status_code == api.status_code == 200
    (row,) = api.json()["commits"]
    xpu = [b["backend"] for b in api.json()["backends"]].index("intel/torch-xpu-ops")
    assert row["sha"] == newest.sha and row["cells"][xpu]["outcome"] == "failed"
    assert 'class="test-cell outcome-failed' in page.content.decode()


def test_a_test_nobody_failed_is_still_a_404_on_both(client, world):  # noqa: F811
    test = "test_ops.TestFoo.test_never_float32"
    assert client.get("/test/" + quote(test, safe="")).status_code == 404
    assert client.get(f"/api/v1/tests/{quote(test, safe='')}/history").status_code == 404
