"""One test's history from the store: commits × backends, the reference first, each cell's
outcome, mark (the baseline's rule), since when, flakiness and the selectors bisection uses."""

import pytest
from django.utils import timezone

from relay.models import TestIdentity, UpstreamCommit
from relay.results.tests import BadCursor, identities_matching, last_pass_before, states_for, test_history
from relay.teststore.store import store_sweep

from .conftest import ADD, MUL, named, ran

pytestmark = pytest.mark.django_db


def history(test=ADD, **kwargs):
    return test_history(TestIdentity.objects.get(identity=test), **kwargs)


def column(h, project):
    return [c.project.id for c in h.columns].index(project.id)


def test_the_rows_are_trunk_commits_newest_first_and_the_reference_comes_first(world):
    h = history()
    assert [r.sha for r in h.rows] == [c.sha for c in reversed(world["commits"])]
    assert h.columns[0].project == world["reference"]


def test_an_upstream_break_reads_shared_on_every_backend_and_on_the_reference_from_its_commit_on(world):
    h = history()
    for row in h.rows[:2]:
        assert [(c.outcome, c.mark) for c in row.cells] == [("failed", "shared")] * 3
    for row in h.rows[2:]:
        assert [(c.outcome, c.inferred, c.mark) for c in row.cells] == [("passed", True, None)] * 3


def test_each_backend_says_its_first_failing_commit_and_the_last_pass_before_it(world):
    h = history()
    first, last = world["commits"][2].sha, world["commits"][1].sha
    assert {(c.streak.first_failing, c.streak.last_passing) for c in h.columns} == {(first, last)}
    assert all(c.first_failing for c in h.rows[1].cells) and all(c.last_passing for c in h.rows[2].cells)
    assert last_pass_before(TestIdentity.objects.get(identity=ADD), world["xpu"].id, world["commits"][3].sha) == last


def test_a_test_that_passed_on_retry_reads_passed_on_retry_and_flaky(world):
    h = history(MUL)
    cell = h.rows[2].cells[column(h, world["xpu"])]
    assert (cell.outcome, cell.on_retry, cell.attempt, [a.outcome for a in cell.attempts]) == (
        "passed",
        True,
        2,
        ["failed", "passed"],
    )
    state = h.columns[column(h, world["xpu"])].health
    assert (state.state, state.pass_on_retry) == ("flaky", 1)
    assert states_for({(world["xpu"].id, MUL)})[(world["xpu"].id, MUL)].flaky


def test_a_backend_only_failure_reads_backend_only(world):
    newest = UpstreamCommit.objects.create(sha="e" * 40, is_trunk=True, landed_at=timezone.now())
    ran(world["reference"], newest)
    ran(world["xpu"], newest, "failure", [named("XPU", "xpu")])
    store_sweep(timezone.now())
    cell = history().rows[0].cells[column(history(), world["xpu"])]
    assert (cell.outcome, cell.mark) == ("failed", "backend_only")


def test_pages_follow_a_cursor_to_older_commits(world):
    first = history(limit=3)
    assert len(first.rows) == 3 and first.next_cursor
    older = history(cursor=first.next_cursor, limit=3)
    assert [r.sha for r in older.rows] == [world["commits"][0].sha] and older.next_cursor is None
    with pytest.raises(BadCursor):
        history(cursor="not-a-cursor")


def test_search_finds_a_test_by_its_id_or_its_name(world):
    assert [i.identity for i in identities_matching(ADD)] == [ADD]
    assert {i.identity for i in identities_matching("test_mul")} == {MUL}
    assert identities_matching("te") == []


def test_a_failure_the_minute_sweep_has_not_stored_yet_reads_failed_never_passed(world):
    from relay.teststore.store import commit_record

    newest = UpstreamCommit.objects.create(sha="f" * 40, is_trunk=True, landed_at=timezone.now())
    ran(world["reference"], newest, "failure", [named("PRIVATEUSE1", "openreg")])
    ran(world["xpu"], newest, "failure", [named("XPU", "xpu")])
    commit_record(newest.sha, world["xpu"])  # the reference's result came after the sweep's run
    row = history().rows[0]
    assert [(c.outcome, c.mark) for c in row.cells[:2]] == [("failed", "shared"), ("failed", "shared")]
