"""Issue 50 item 5: a failure an open known issue accounts for reads as known on the backend
page's since-which-commit list, never as the backend's regression, and /api/v1/culprits says so."""

import pytest

from relay.models import KnownIssue, UpstreamCommit
from relay.teststore.store import store_sweep
from tests.api.conftest import api  # noqa: F401 - the fixture
from tests.relay.teststore.conftest import ADD, named, ran, world  # noqa: F401 - the fixture

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]


@pytest.fixture
def backend_only(world):  # noqa: F811
    """On the newest trunk commit the reference passes and XPU fails test_add: backend-only."""
    newest = UpstreamCommit.objects.create(sha="e" * 40, is_trunk=True, title="change (#160001)")
    ran(world["reference"], newest)
    ran(world["xpu"], newest, "failure", [named("XPU", "xpu")])
    store_sweep()
    return newest


def line_of(body: str, subject: str) -> str:
    start = body.index(f'data-subject="{subject}"')
    return body[start : body.index("</li>", start)]


def test_a_known_failure_reads_known_not_backend_only_on_the_page_and_in_the_api(client, api, world, backend_only):  # noqa: F811
    issue = KnownIssue.objects.create(
        title="add is broken on XPU",
        url="https://github.com/intel/torch-xpu-ops/issues/7",
        test_patterns=["*test_add*"],
    )
    line = line_of(client.get("/crcr/intel/torch-xpu-ops").content.decode(), ADD)
    assert 'data-known="known"' in line and f"known issue #{issue.pk}: add is broken on XPU" in line
    assert "backend-only" not in line and "culprit" not in line
    streaks = api.get("/api/v1/culprits", {"backend": "intel/torch-xpu-ops"}).json()["streaks"]
    (add,) = [s for s in streaks if s["subject"] == ADD]
    assert add["known"] == {
        "kind": "known",
        "issue": issue.pk,
        "label": f"known issue #{issue.pk}: add is broken on XPU",
        "url": "https://github.com/intel/torch-xpu-ops/issues/7",
    }


def test_an_unknown_failure_stays_backend_only_with_no_known_field(client, api, world, backend_only):  # noqa: F811
    line = line_of(client.get("/crcr/intel/torch-xpu-ops").content.decode(), ADD)
    assert "≠ backend-only" in line and "data-known" not in line
    streaks = api.get("/api/v1/culprits", {"backend": "intel/torch-xpu-ops"}).json()["streaks"]
    assert [s["known"] for s in streaks if s["subject"] == ADD] == [None]
