"""One store with a run of every kind and a row of every state, and every surface asked the same
two questions of it: which job rows count (relay.stats.runkinds' table) and which commits are trunk (the
one trunk rule). Each surface reads through its own code path (the cells' loader, the gate, the
tallies' SQL, the backend page's window, the E2E p50, the test store, the pages and the API); each
must give the table's answer."""

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from hud.selectors_backend import heads_in_window, jobs_by_head
from relay.callbacks.receive import pr_head_only
from relay.checks.reactions import job_shows_on_pr
from relay.levels.e2e import e2e_p50
from relay.levels.readiness import first_result_at
from relay.models import (
    BISECT_EVENT,
    Bisection,
    Expectation,
    JobRun,
    KnownIssue,
    PullRequest,
    TestHealth,
    TestRun,
    UpstreamCommit,
)
from relay.results.cells import cells_for_commits
from relay.results.gate import gate_verdict
from relay.stats import runkinds
from relay.stats.runkinds import COUNTS, Figure, Kind, counts, kind_of
from relay.tallies.rollups import window_tallies
from relay.teststore.store import commit_record, steps_streaks
from relay.triage.issues import occurrences_record
from relay.triage.mutes import mute_create
from tests.factories import DeliveryFactory, DispatchFactory, FailedTestFactory, ProjectFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]

T0, T1, T2 = "a0" * 20, "a1" * 20, "a2" * 20
"""Trunk commits, oldest first: T0 only bisected, T2 landed PR #7."""
HEAD, CLOSED = "b1" * 20, "b2" * 20
"""PR #8's head (with its ciflow/trunk merge run), and PR #9's head, closed."""
UNRECORDED = "c1" * 20
"""A commit whose push the relay never heard: a nightly ran on it."""


def reported(method):
    return {"classname": "test_ops.TestCommonXPU", "name": f"{method}_xpu_float32", "file": "test/test_ops.py"}


@pytest.fixture
def store():
    now = timezone.now()
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4")
    for n, sha in enumerate((T0, T1, T2)):
        title = "Fix addmm (#7)" if sha == T2 else f"Commit {n}"
        UpstreamCommit.objects.create(
            sha=sha, is_trunk=True, title=title, landed_at=now - timedelta(hours=6 - n), parent_sha=("", T0, T1)[n]
        )
    UpstreamCommit.objects.create(sha=HEAD, pr_number=8, title="Speed up mul")
    UpstreamCommit.objects.create(sha=CLOSED, pr_number=9, title="Abandoned")
    PullRequest.objects.create(number=7, head_sha="d7" * 20, state="merged")
    PullRequest.objects.create(number=8, head_sha=HEAD, state="open", base_sha=T2)
    PullRequest.objects.create(number=9, head_sha=CLOSED, state="closed")
    rows = {}

    def run(name, sha, event, conclusion="failure", failed=(), dispatch=None, queue=900.0, minutes=3):
        at = now - timedelta(minutes=minutes * 10)
        pr = {HEAD: 8, CLOSED: 9}.get(sha)
        row = JobRun.objects.create(
            project=xpu,
            dispatch=dispatch,
            delivery_key=dispatch.delivery.guid if dispatch else sha,
            event_type=event,
            run_id=f"run-{name}",
            job_name=name,
            workflow_name="ci",
            status="completed",
            conclusion=conclusion,
            head_sha=sha,
            pr_number=pr if event in ("pull_request", "push") else None,
            created_at=at,
            in_progress_at=at,
            completed_at=at + timedelta(minutes=10),
            queue_seconds=queue,
            tests_total=20,
            tests_failed=len(failed) or None,
        )
        for method in failed:
            FailedTestFactory(job_run=row, **reported(method))
        rows[name] = row

    def dispatched(sha, event, action, pr):
        delivery = DeliveryFactory(event=event, action=action, head_sha=sha, pr_number=pr)
        return DispatchFactory(delivery=delivery, project=xpu, event_type=event, head_sha=sha, pr_number=pr)

    run("push-t1", T1, "push", failed=["test_add"], dispatch=dispatched(T1, "push", "", None), minutes=9)
    run("push-t2", T2, "push", failed=["test_add"], dispatch=dispatched(T2, "push", "", None), minutes=8)
    run("nightly-t2", T2, "nightly", failed=["test_add"], minutes=7)
    run("periodic-t1", T1, "periodic", conclusion="success", minutes=7)
    head = dispatched(HEAD, "pull_request", "synchronize", 8)
    run("pr-head", HEAD, "pull_request", failed=["test_mul"], dispatch=head, queue=111.0, minutes=6)
    run("merge-run", HEAD, "push", conclusion="success", dispatch=dispatched(HEAD, "push", "", 8), minutes=6)
    closing = dispatched(CLOSED, "pull_request", "closed", 9)
    run("closing", CLOSED, "pull_request", failed=["test_pow"], dispatch=closing, minutes=5)
    probe = dispatched(T0, BISECT_EVENT, "", None)
    run("probe", T0, BISECT_EVENT, failed=["test_sub"], dispatch=probe, minutes=12)  # the first row
    run("nightly-unrecorded", UNRECORDED, "nightly", failed=["test_div"], minutes=3)

    # Every state beside them: none may change which rows count or what is trunk.
    KnownIssue.objects.create(title="mul is slow", test_patterns=["TestCommon.test_mul*"], blocks_gate=False)
    KnownIssue.objects.create(title="xpu dtype gaps", test_patterns=["TestCommon.test_*"], state="resolved")
    Expectation.objects.create(project=xpu, pattern="TestCommon.test_pow*", kind=Expectation.Kind.FAIL)
    Expectation.objects.create(project=xpu, pattern="TestCommon.test_sub*", kind=Expectation.Kind.FLAKY)
    mute_create(xpu, "test_ops.TestCommon.test_div_float32", "noisy", "xpu-team", "tester", days=7)
    for state, culprit in ((Bisection.State.VERIFIED, T2), (Bisection.State.NOT_REPRODUCIBLE, "")):
        Bisection.objects.create(
            project=xpu, state=state, good_sha=T0, bad_sha=T2, commits=[T1, T2], culprit_sha=culprit, finished_at=now
        )
    for sha in (T0, T1, T2, UNRECORDED, HEAD, CLOSED):
        commit_record(sha, xpu)
    return xpu, rows, now


KINDS = {
    "push-t1": Kind.TRUNK_PUSH,
    "push-t2": Kind.TRUNK_PUSH,
    "nightly-t2": Kind.NIGHTLY,
    "periodic-t1": Kind.PERIODIC,
    "pr-head": Kind.PR_HEAD,
    "merge-run": Kind.TRUNK_PUSH,
    "closing": Kind.CLOSING,
    "probe": Kind.PROBE,
    "nightly-unrecorded": Kind.SELF_REPORT,
}


def trunk(row) -> bool:
    return row.head_sha in (T0, T1, T2)


def expected(rows, figure: Figure, sha: str | None = None) -> set[str]:
    """The names of the rows `figure` counts, by the table."""
    return {
        name
        for name, row in rows.items()
        if counts(figure, KINDS[name], trunk(row)) and (sha is None or row.head_sha == sha)
    }


def names(rows, ids) -> set[str]:
    return {name for name, row in rows.items() if row.id in set(ids)}


# --- the vocabulary ---------------------------------------------------------------------------------


def test_every_row_has_the_kind_its_facts_give(store):
    _, rows, _ = store
    closings = {"closing"}
    assert {n: kind_of(r.event_type, n in closings, runkinds.on_trunk(r.head_sha)) for n, r in rows.items()} == KINDS
    assert set(KINDS.values()) == set(Kind)


def test_only_the_trunk_rule_asks_the_trunk_record():
    """One trunk rule: every reader asks relay.stats.runkinds (`trunk_commits`, `on_trunk`, `pr_heads`)
    rather than filtering commits by their flag itself (the intake writes the flag, never filters)."""
    root = Path(__file__).resolve().parents[3]
    asking = re.compile(r"is_trunk\s*=\s*(True|False)")
    offenders = {
        str(path.relative_to(root))
        for top in ("relay", "hud", "api")
        for path in (root / top).rglob("*.py")
        if "migrations" not in path.parts and asking.search(path.read_text())
    }
    assert offenders == {"relay/stats/runkinds.py"}


def test_probes_closings_and_unplaced_self_reports_count_for_no_commit():
    for figure in Figure:
        assert not COUNTS[figure].kinds & {Kind.PROBE, Kind.CLOSING}, figure
    for figure in (Figure.CELLS, Figure.VERDICTS, Figure.GATE, Figure.TEST_STREAKS, Figure.QUALITY):
        assert Kind.SELF_REPORT not in COUNTS[figure].kinds, figure


@pytest.mark.parametrize("figure", list(Figure))
def test_the_queryset_and_the_sql_of_each_figure_pick_the_rows_the_table_names(store, figure):
    _, rows, _ = store
    by_orm = runkinds.jobs_counted(figure).values_list("id", flat=True)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT j.id FROM relay_jobrun j WHERE {runkinds.counted_sql(figure, 'j')}")
        by_sql = [row[0] for row in cursor.fetchall()]
    assert names(rows, by_orm) == names(rows, by_sql) == expected(rows, figure)


# --- each surface ------------------------------------------------------------------------------------


def test_the_cells_hold_the_rows_the_table_counts(store):
    xpu, rows, _ = store
    cells = cells_for_commits([T0, T1, T2, HEAD, CLOSED, UNRECORDED], [xpu])
    held = [v.job.id for cell in cells.values() for v in cell.verdicts]
    assert names(rows, held) == expected(rows, Figure.CELLS)
    assert names(rows, held) == {"push-t1", "push-t2", "nightly-t2", "periodic-t1", "pr-head", "merge-run"}


def test_the_gate_and_its_api_judge_the_head_by_the_rows_the_table_counts(store):
    _, rows, _ = store
    gate = gate_verdict(8, HEAD)
    judged = {job["job"] for backend in gate["backends"] for job in backend["jobs"]}
    assert judged == expected(rows, Figure.GATE, HEAD) == {"pr-head", "merge-run"}
    assert APIClient().get("/api/v1/prs/8/gate").json()["backends"] == gate["backends"]
    closed = {job["job"] for backend in gate_verdict(9, CLOSED)["backends"] for job in backend["jobs"]}
    assert closed == expected(rows, Figure.GATE, CLOSED) == set()


def test_the_tallies_count_per_tab_the_rows_the_table_counts(store):
    xpu, rows, now = store
    tallies = window_tallies(1, now + timedelta(minutes=1))
    for tab in ("pr", "nightly", "periodic"):
        tally = tallies.get((xpu.pk, tab))
        counted = sum(tally.verdicts.values()) if tally else 0
        assert counted == len({n for n in expected(rows, Figure.TALLIES) if runkinds.tab_of(rows[n].event_type) == tab})
    assert sum(tallies[(xpu.pk, "pr")].verdicts.values()) == 4  # two trunk pushes, the PR head, its merge run


def test_what_shows_on_the_pr_is_what_the_gate_counts(store):
    _, rows, _ = store
    for name, row in rows.items():
        job = JobRun.objects.select_related("project", "dispatch__delivery").get(pk=row.pk)
        assert job_shows_on_pr(job) == (bool(row.pr_number) and name in expected(rows, Figure.GATE)), name
    assert {n for n, r in rows.items() if job_shows_on_pr(r)} == {"pr-head", "merge-run"}


def test_a_known_issue_is_seen_again_in_the_rows_the_table_counts(store):
    _, rows, _ = store
    seen = {name for name, row in rows.items() if occurrences_record(row.pk)}
    failed = {name for name, row in rows.items() if row.conclusion == "failure"}
    assert seen == expected(rows, Figure.OCCURRENCES) & failed
    assert not seen & {"closing", "probe"} and "nightly-unrecorded" in seen


def test_the_backend_page_lists_the_heads_and_jobs_the_table_counts(store):
    xpu, rows, now = store
    for tab in ("pr", "nightly", "periodic"):
        wanted = {n for n in expected(rows, Figure.BACKEND_PAGE) if runkinds.tab_of(rows[n].event_type) == tab}
        heads = {h["head_sha"] for h in heads_in_window(xpu, tab, now - timedelta(days=1))}
        assert heads == {rows[n].head_sha for n in wanted}
        jobs = [job.id for listed in jobs_by_head(xpu, tab, heads).values() for job in listed]
        assert names(rows, jobs) == wanted
    assert T0 not in {h["head_sha"] for h in heads_in_window(xpu, "pr", now - timedelta(days=1))}  # only probed


def test_the_e2e_p50_samples_the_runs_the_table_counts(store):
    xpu, rows, now = store
    (only,) = expected(rows, Figure.E2E_P50)
    assert only == "pr-head"
    assert e2e_p50(xpu, now - timedelta(days=1)) == rows[only].queue_seconds + 600


def test_test_streaks_move_on_trunk_commits_only(store):
    xpu, rows, _ = store
    health = {h.identity.method: h for h in TestHealth.objects.filter(project=xpu).select_related("identity")}
    assert health["test_add"].failing_streak == 2  # T1 and T2, pushed and nightly
    assert "test_div" not in health or health["test_div"].failing_streak == 0  # the nightly no page places
    assert "test_mul" not in health or health["test_mul"].failing_streak == 0  # a PR's own change
    assert not TestRun.objects.filter(identity__method__in=["test_pow", "test_sub"]).exists()  # closing, probe
    for sha, name in ((T2, "nightly-t2"), (UNRECORDED, "nightly-unrecorded"), (HEAD, "pr-head"), (T1, "push-t1")):
        wanted = counts(Figure.TEST_STREAKS, KINDS[name], trunk(rows[name]))
        assert steps_streaks(sha, [rows[name]]) == wanted, name


def test_one_trunk_rule_for_the_callback_the_store_and_the_pages(client, store):
    xpu, rows, _ = store
    for sha in (T0, T1, T2, HEAD, CLOSED, UNRECORDED):
        trunk_here = runkinds.on_trunk(sha)
        assert trunk_here == (sha in (T0, T1, T2))
        assert trunk_here == UpstreamCommit.objects.filter(sha=sha, is_trunk=True).exists()
        assert not (pr_head_only(sha) and trunk_here)
    assert pr_head_only(HEAD) and not pr_head_only(UNRECORDED)
    page = client.get(f"/commit/{UNRECORDED}").content.decode()
    assert "nightly-unrecorded" not in page  # shown on no page, and moving no streak (above)
    page = client.get(f"/commit/{T2}").content.decode()
    assert "nightly-t2" in page and "push-t2" in page


def test_the_pages_and_the_api_show_a_commit_s_counted_rows_and_no_other(client, store):
    _, rows, _ = store
    for sha in (T0, T1, HEAD, CLOSED):
        page = client.get(f"/commit/{sha}").content.decode()
        api = str(APIClient().get(f"/api/v1/commits/{sha}/baseline").json())
        for name, row in rows.items():
            if row.head_sha == sha:
                assert (name in page) == (name in expected(rows, Figure.CELLS, sha)), (sha, name)
                if row.conclusion == "failure":
                    assert (name in api) == (name in expected(rows, Figure.CELLS, sha)), (sha, name)


def test_level_status_counts_the_rows_the_table_counts(store):
    """The level criteria read the pull-request tab's tallies and the E2E p50: the closing
    clean-up's failure and the probe's are not the backend's, nor is the merge run an E2E sample."""
    xpu, rows, _ = store
    (repo,) = APIClient().get("/api/v1/level-status", {"repo": xpu.full_name}).json()["repos"]
    pr_tab = {n for n in expected(rows, Figure.TALLIES) if runkinds.tab_of(rows[n].event_type) == "pr"}
    passed = {n for n in pr_tab if rows[n].conclusion == "success"}
    assert (repo["passRate"]["jobs"], repo["passRate"]["passed"]) == (len(pr_tab), len(passed)) == (4, 1)
    (e2e,) = [c for c in repo["criteria"] if c["criterion"] == "e2e_p50"]
    assert e2e["measured"] == e2e_p50(xpu, timezone.now() - timedelta(days=7)) == rows["pr-head"].queue_seconds + 600


def test_a_backend_s_tenure_starts_at_its_first_row_the_tallies_count(store):
    xpu, rows, _ = store
    first = min((rows[n] for n in expected(rows, Figure.TALLIES)), key=lambda r: r.created_at)
    assert first_result_at(xpu) == first.created_at != rows["probe"].created_at
