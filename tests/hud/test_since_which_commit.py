"""Since which commit (issue 50 item 3): once a bisection verified a culprit, it is the answer on
every surface, the range its evidence; the culprit's and its parent's re-runs appear in the test's
history and on the culprit's own commit page, which no trunk run of the backend tested."""

from datetime import timedelta
from urllib.parse import quote

import pytest

from relay.models import Bisection
from tests.api.conftest import api  # noqa: F401 - the fixture
from tests.factories import UpstreamCommitFactory
from tests.relay.bisect.conftest import run_to_the_end
from tests.relay.teststore.conftest import ADD, world  # noqa: F401 - the fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]


@pytest.fixture
def culprit(world):  # noqa: F811
    """Two trunk commits no backend tested land between the last pass and the first failure; the
    bisection over the three verifies the second of them."""
    last_pass, first_red = world["commits"][1], world["commits"][2]
    middle = [UpstreamCommitFactory(landed_at=last_pass.landed_at + timedelta(minutes=20 * n)) for n in (1, 2)]
    bisection = Bisection.objects.create(
        project=world["xpu"],
        good_sha=last_pass.sha,
        bad_sha=first_red.sha,
        commits=[middle[0].sha, middle[1].sha, first_red.sha],
        tests=[{"test_id": ADD, "job": "ci / test"}],
        bad_index=3,
    )
    bisection = run_to_the_end(bisection, 2)
    assert (bisection.state, bisection.culprit_sha) == ("verified", middle[1].sha)
    return {"bisection": bisection, "culprit": middle[1], "parent": middle[0], "first_red": first_red}


def test_the_backend_page_answers_the_verified_culprit_with_the_range_as_its_evidence(client, world, culprit):  # noqa: F811
    body = client.get("/crcr/intel/torch-xpu-ops").content.decode()
    sha = culprit["culprit"].sha
    assert f'data-since="{sha}" data-since-answer="culprit"' in body
    assert f'<strong>verified culprit <a class="mono" href="/commit/{sha}"' in body
    assert "<strong>3 suspect commits</strong>" not in body and "bisected: verified culprit" not in body
    assert "evidence: first red at" in body and "Intel XPU&#x27;s own probes at L4" in body


def test_the_api_says_the_same_since(api, world, culprit):  # noqa: F811
    streaks = api.get("/api/v1/culprits", {"backend": "intel/torch-xpu-ops"}).json()["streaks"]
    (add,) = [s for s in streaks if s["subject"] == ADD]
    assert add["since"] == {
        "commit": culprit["culprit"].sha,
        "answer": "culprit",
        "bisection": culprit["bisection"].pk,
        "verified_by": {"backend": "intel/torch-xpu-ops", "level": "L4"},
    }
    assert add["first_failing"] == culprit["first_red"].sha and add["suspect_count"] == 3


def test_the_test_history_shows_the_culprit_and_its_parent_re_runs(api, client, world, culprit):  # noqa: F811
    history = api.get(f"/api/v1/tests/{quote(ADD, safe='')}/history").json()
    xpu = [b["backend"] for b in history["backends"]].index("intel/torch-xpu-ops")
    rows = {row["sha"]: row["cells"][xpu] for row in history["commits"]}
    on_culprit, on_parent = rows[culprit["culprit"].sha], rows[culprit["parent"].sha]
    pk = culprit["bisection"].pk
    assert (on_culprit["outcome"], on_culprit["probe"]) == (
        "failed",
        {"role": "culprit", "outcome": "fail", "bisection": pk},
    )
    assert (on_parent["outcome"], on_parent["probe"]) == (
        "passed",
        {"role": "parent", "outcome": "pass", "bisection": pk},
    )
    assert history["backends"][xpu]["since"]["commit"] == culprit["culprit"].sha
    page = client.get("/test/" + quote(ADD, safe="")).content.decode()
    assert "probe: culprit re-run" in page and "probe: parent re-run" in page
    assert f'data-since="{culprit["culprit"].sha}"' in page


def test_the_culprit_s_commit_page_shows_the_probes_instead_of_no_result(client, world, culprit):  # noqa: F811
    body = client.get(f"/commit/{culprit['culprit'].sha}").content.decode()
    box = body[body.index(f'id="backend-{world["xpu"].pk}"') :]
    box = box[: box.index("</details>")]
    assert 'data-role="culprit" data-outcome="fail"' in box
    assert "Nothing was dispatched" not in box and "bisection probes only" in box
    table = body[body.index('class="data baseline-table"') :]
    assert "bisection probes only: search probe ✗ failed, culprit re-run ✗ failed" in table[: table.index("</table>")]


def test_the_suggested_issues_page_answers_the_same_since(client, world, culprit):  # noqa: F811
    body = client.get("/known-issues/suggested").content.decode()
    assert f'verified culprit <a class="mono" href="/commit/{culprit["culprit"].sha}"' in body


def grid_cell(body: str, sha: str, project_id: int) -> str:
    row = body[body.index(f'<tr data-sha="{sha}"') :].split("</tr>")[0]
    return next(td for td in row.split("<td")[1:] if f'data-p="{project_id}"' in td)


def test_the_grid_row_of_a_culprit_no_trunk_run_tested_shows_the_probes(client, world, culprit):  # noqa: F811
    """The culprit landed inside a push no backend tested commit by commit: its row has no counted
    result anywhere, and the bisecting backend's cell says what its probes said there, in the
    commit page's words, as does the cell's tooltip."""
    xpu = world["xpu"].pk
    body = client.get("/").content.decode()
    on_culprit, on_parent = grid_cell(body, culprit["culprit"].sha, xpu), grid_cell(body, culprit["parent"].sha, xpu)
    assert "bisection probes only: search probe ✗ failed, culprit re-run ✗ failed" in on_culprit
    assert 'class="mk mk-probe_fail"' in on_culprit
    assert "bisection probes only:" in on_parent and "parent re-run ✓ passed" in on_parent
    assert "bisection probes only" not in grid_cell(body, culprit["culprit"].sha, world["rocm"].pk)
    tip = client.get("/", {"tip": f"{culprit['culprit'].sha}.{xpu}"}).content.decode()
    assert 'data-role="culprit" data-outcome="fail"' in tip and "bisection probes only" in tip
