"""/test/<identity>: the page's states (data, not found, bad cursor, htmx) and the links to it."""

from urllib.parse import quote

import pytest

from tests.relay.teststore.conftest import ADD, MUL, named, ran, world  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


def get_page(client, identity):
    return client.get("/test/" + quote(identity, safe=""))


def test_the_page_shows_the_history_with_shared_marks_and_the_flaky_state(client, world):  # noqa: F811
    response = get_page(client, ADD)
    body = response.content.decode()
    assert response.status_code == 200
    assert body.count('=<span class="sr-only"> shared</span>') == 6 and "OpenReg" in body and "Intel XPU" in body
    assert body.index("OpenReg") < body.index("Intel XPU")
    flaky = get_page(client, MUL).content.decode()
    assert "~ flaky" in flaky and "1 pass-on-retry" in flaky and "retry</span>" in flaky


def test_an_unknown_test_is_a_404_that_says_so(client, world):  # noqa: F811
    response = get_page(client, "test_ops.TestFoo.test_never_failed")
    assert response.status_code == 404 and "no history" in response.content.decode()


def test_a_cursor_it_did_not_make_is_a_400(client, world):  # noqa: F811
    response = client.get("/test/" + quote(ADD, safe="") + "?after=garbage")
    assert response.status_code == 400


def test_htmx_gets_the_region_only(client, world):  # noqa: F811
    response = client.get("/test/" + quote(ADD, safe=""), headers={"HX-Request": "true"})
    assert response.status_code == 200 and "<html" not in response.content.decode()


def test_an_identity_with_brackets_and_slashes_round_trips_through_its_url():
    from hud.templatetags.hud_tags import test_url

    assert test_url("test_x.test_op[add-a/b c]") == "/test/test_x.test_op%5Badd-a%2Fb%20c%5D"


def test_search_takes_a_test_id_or_a_part_of_its_name_to_its_page(client, world):  # noqa: F811
    assert client.get("/search", {"q": ADD})["Location"] == "/test/" + quote(ADD, safe="")
    assert client.get("/search", {"q": "test_mul"})["Location"] == "/test/" + quote(MUL, safe="")
    listed = client.get("/search", {"q": "TestFoo"})
    assert listed.status_code == 200 and ADD in listed.content.decode() and MUL in listed.content.decode()


def test_every_failed_test_on_the_commit_page_and_in_the_tooltip_links_to_its_page(client, world):  # noqa: F811
    newest = world["commits"][-1].sha
    body = client.get(f"/commit/{newest}").content.decode()
    assert f'href="/test/{quote(ADD, safe="")}"' in body
    ran(world["xpu"], world["commits"][-1], "failure", [named("XPU", "xpu", "test_mul")], run_id="m", job_name="s2")
    tip = client.get("/", {"tip": f"{newest}.{world['xpu'].id}"}).content.decode()
    assert f'href="/test/{quote(MUL, safe="")}"' in tip and "~ flaky · 1 pass-on-retry" in tip
    assert "~ flaky · 1 pass-on-retry" in client.get(f"/commit/{newest}").content.decode()


def test_the_backend_page_and_the_summary_show_the_quality_figures_and_the_flaky_tests(client, world):  # noqa: F811
    page = client.get("/crcr/intel/torch-xpu-ops").content.decode()
    assert 'id="quality"' in page and "Coverage of the reference" in page and "Time to recover" in page
    assert f'href="/test/{quote(MUL, safe="")}"' in page and "~ flaky" in page
    summary = client.get("/crcr").content.decode()
    assert "Quality by backend" in summary and "Intel XPU" in summary


def test_the_flaky_share_shows_its_count_beside_the_share(client, world):  # noqa: F811
    """ "Flaky 0.0 %" for 2 of 5,421 tests: the count is on the page, the backend's and the summary's."""
    import re

    page = client.get("/crcr/intel/torch-xpu-ops").content.decode()
    row = page[page.index('class="figure-flaky_share"') :].split("</tr>")[0]
    assert re.search(r"\d+ of [\d,]+ · \d+\.\d %", row), row
    summary = client.get("/crcr").content.decode()
    assert re.search(r"\d+ of [\d,]+ · \d+\.\d %", summary[summary.index("Quality by backend") :])


def test_a_failure_shared_with_the_reference_reads_shared_never_flaky(client, world):  # noqa: F811
    """test_add fails with the reference on XPU; were it flaky there too, its shared cells say
    "shared with the reference", not "~ flaky: not a regression"."""
    from relay.models import TestHealth, identity_digest

    TestHealth.objects.filter(identity__digest=identity_digest(ADD), project=world["xpu"]).update(state="flaky")
    body = get_page(client, ADD).content.decode()
    history = body[body.index('class="data test-history"') :]
    assert history.count('=<span class="sr-only"> shared</span>') == 6
    assert "state-flaky" not in history and "not a regression" not in body


def flaky_items(body: str) -> list[str]:
    """The list items of a page that carry the flaky badge."""
    items = [item.split("</li>")[0] for item in body.split("<li>")[1:]]
    return [item for item in items if "state-flaky" in item]


def test_every_list_of_failed_tests_reads_a_shared_failure_shared_never_flaky(client, world):  # noqa: F811
    """The one rule (relay.results.tests.reads_flaky) in every list: the grid's tooltip, the commit
    page's job lists and the backend page's cell detail. test_add fails with the reference on the
    newest commit and is flaky on XPU: no flaky badge; test_mul, flaky and failing on XPU alone,
    keeps it."""
    from relay.models import TestHealth, identity_digest

    TestHealth.objects.filter(identity__digest=identity_digest(ADD), project=world["xpu"]).update(state="flaky")
    newest = world["commits"][-1].sha
    ran(world["xpu"], world["commits"][-1], "failure", [named("XPU", "xpu", "test_mul")], run_id="m", job_name="s2")
    backend_cell = f"/crcr/intel/torch-xpu-ops?cell={newest}:"
    pages = {
        "tooltip": client.get("/", {"tip": f"{newest}.{world['xpu'].id}"}),
        "commit page": client.get(f"/commit/{newest}"),
        "backend cell": client.get(backend_cell + "test", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="cell-detail"),
        "backend cell of test_mul": client.get(
            backend_cell + "s2", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="cell-detail"
        ),
    }
    flagged = {where: " ".join(flaky_items(response.content.decode())) for where, response in pages.items()}
    assert not [where for where, items in flagged.items() if "test_add" in items], "a shared failure reads flaky"
    assert [where for where, items in flagged.items() if "test_mul" in items] == [
        "tooltip",
        "commit page",
        "backend cell of test_mul",
    ], "a backend-only failure of a flaky test keeps its badge"


def test_the_history_api_answers_flaky_as_the_page_shows_it(client, world):  # noqa: F811
    from relay.models import TestHealth, identity_digest

    TestHealth.objects.filter(identity__digest=identity_digest(ADD), project=world["xpu"]).update(state="flaky")
    history = client.get(f"/api/v1/tests/{quote(ADD, safe='')}/history").json()
    xpu = [b["backend"] for b in history["backends"]].index("intel/torch-xpu-ops")
    cells = [row["cells"][xpu] for row in history["commits"] if row["cells"][xpu]["mark"] == "shared"]
    assert cells and not any(cell["flaky"] for cell in cells)
