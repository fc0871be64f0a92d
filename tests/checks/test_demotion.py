"""The demotion loop end to end: the HUD's beat task decides from level-status, the relay's
DEMOTION_SYNC writes reach the GitHub stand-in over HTTP, and what upstream sees is a bot PR
moving one allowlist entry down, refreshed, closed after recovery, opened again after a person
closed it; while it is open the repo gets no new check runs."""

import difflib
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone

from relay.levels.tasks import demotion_prs_reconcile
from relay.models import DemotionDecision, DemotionPullRequest, FailedTest, JobRun, Project, UpstreamCheckRun
from relay.registry.allowlist import parse_allowlist
from relay.registry.service import allowlist_export
from relay.tallies.rollups import rollups_refresh
from tests.conftest import UPSTREAM
from tests.hud.test_selectors_summary import job, project

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_tallies")]
PATH = ".github/allowlist.yml"
BRANCH = "crcr-demotion/vendor/own-ci"
TITLE = "[CRCR] Demote vendor/own-ci from L3 to L2"


def recent():
    return timezone.now() - timedelta(hours=2)


def results(proj, passed: int, own: int = 0, shared: int = 0, reference=None, start: int = 0):
    """`own` failures the reference passes, `shared` ones it fails too (excused)."""
    for i in range(start, start + passed + own + shared):
        sha = f"{proj.pk:04x}{i:036x}"
        if i < start + passed:
            job(proj, "success", sha=sha, at=recent())
            continue
        run = job(proj, "failure", sha=sha, at=recent(), tests_total=100, tests_failed=1)
        FailedTest.objects.create(job_run=run, classname="TestFooPRIVATEUSE1", name="test_add_own_float32")
        ref = job(reference, "failure" if i >= start + passed + own else "success", sha=sha, at=recent())
        if ref.conclusion == "failure":
            FailedTest.objects.create(job_run=ref, classname="TestFooPRIVATEUSE1", name="test_add_openreg_float32")


def l3(name: str, device: str) -> Project:
    return Project.objects.create(full_name=name, level="L3", device=device)


@pytest.fixture
def reference():
    return project("pytorch/openreg-ci", is_reference=True, hardware_kind="reference")


@pytest.fixture
def world(relay, reference):
    """An L3 backend failing on its own, a healthy L3 one, and main's allowlist exported from them."""
    own = relay.backend("vendor/own-ci", "L3", device="own", oncalls=["own-oncall"])
    healthy = l3("vendor/healthy-ci", "good")
    results(own, passed=17, own=3, reference=reference)
    results(healthy, passed=20, reference=reference)
    relay.gh.add_file(UPSTREAM, PATH, allowlist_export())
    return own


def decide(relay) -> None:
    """One beat of the loop, as beat runs it after the rollups' refresh."""
    rollups_refresh()
    cache.clear()  # the excused list is cached for a minute or so
    with relay.capture(execute=True):
        demotion_prs_reconcile()
    relay.drain()


def pulls(relay) -> list[dict]:
    return relay.gh.pulls(UPSTREAM)


def decisions(proj) -> list[str]:
    return list(DemotionDecision.objects.filter(project=proj).order_by("id").values_list("kind", flat=True))


def changed_lines(before: str, after: str) -> list[str]:
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return sorted(line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))


def test_a_backend_failing_on_its_own_gets_a_demotion_pr_moving_exactly_its_entry(relay, world):
    decide(relay)
    [pull] = pulls(relay)
    assert pull["title"] == TITLE and pull["state"] == "open" and pull["head"]["ref"] == BRANCH
    assert [label["name"] for label in pull["labels"]] == ["crcr-auto-demotion"]
    main, branch = relay.gh.file_text(UPSTREAM, PATH), relay.gh.file_text(UPSTREAM, PATH, BRANCH)
    assert changed_lines(main, branch) == [
        "+  - vendor/own-ci: own-oncall",
        "-    vendor/own-ci: [own-oncall]",
        "-  own:",
    ]
    assert {e.full_name: e.level for e in parse_allowlist(branch)}["vendor/own-ci"] == "L2"


def test_the_pr_on_an_allowlist_upstream_commented_changes_only_the_entrys_lines(relay, world):
    """Upstream's file has comments, anchors and blank lines: the PR keeps every one of them."""
    commented = (
        "# upstream's header, kept\n\nL1: []\nL2:\n  - a/b: &team one, two  # anchored\n\n"
        "# L3 backends by device\nL3:\n  good:\n    vendor/healthy-ci: *team\n  own:  # ours\n"
        "    vendor/own-ci: [own-oncall]   # the one failing\nL4: []  # none yet\n"
    )
    relay.gh.add_file(UPSTREAM, PATH, commented)
    decide(relay)
    branch = relay.gh.file_text(UPSTREAM, PATH, BRANCH)
    assert changed_lines(commented, branch) == [
        "+  - vendor/own-ci: own-oncall   # the one failing",
        "-    vendor/own-ci: [own-oncall]   # the one failing",
        "-  own:  # ours",
    ]


def test_the_body_lists_the_missed_criteria_on_both_rates_and_pings_the_oncalls(relay, world):
    decide(relay)
    body = pulls(relay)[0]["body"]
    assert "**Missed:** `pass_rate`" in body
    assert "85.0 % (decided on adjusted; raw 85.0 %, adjusted 85.0 %) | ≥ 90.0 % | ✗ no" in body
    assert "cc @own-oncall" in body
    row = DemotionPullRequest.objects.get(project=world)
    assert row.state == "open" and row.number == pulls(relay)[0]["number"]
    assert decisions(world) == ["opened"]


def test_a_second_run_refreshes_the_pr_instead_of_opening_another(relay, world, reference):
    decide(relay)
    results(world, passed=0, own=5, reference=reference, start=100)  # worse now: 17 of 25
    decide(relay)
    [pull] = pulls(relay)
    assert "68.0 %" in pull["body"]
    assert len(relay.writes_to("POST", f"/repos/{UPSTREAM}/pulls")) == 1
    assert decisions(world) == ["opened"]  # the same criterion missed: the body follows, the audit does not


def test_after_it_recovers_the_pr_is_closed_and_its_branch_deleted(relay, world):
    decide(relay)
    JobRun.objects.filter(project=world, conclusion="failure").update(
        conclusion="success", tests_failed=0, updated_at=timezone.now()
    )
    decide(relay)
    [pull] = pulls(relay)
    assert pull["state"] == "closed" and pull["merged"] is False
    assert pull["body"].startswith("**Closed by the CRCR relay:**")
    assert BRANCH not in relay.gh.branches(UPSTREAM)
    assert DemotionPullRequest.objects.get(project=world).state == "closed"
    assert decisions(world) == ["opened", "closed_recovered"]


def test_a_pr_closed_by_hand_while_the_repo_still_misses_is_opened_again(relay, world):
    decide(relay)
    relay.gh.close_pull(UPSTREAM, pulls(relay)[0]["number"])
    decide(relay)
    first, second = pulls(relay)
    assert first["state"] == "closed" and second["state"] == "open" and second["title"] == TITLE
    assert decisions(world) == ["opened", "closed_by_hand", "reopened"]
    states = dict(DemotionPullRequest.objects.filter(project=world).values_list("number", "state"))
    assert states == {first["number"]: "closed_by_hand", second["number"]: "open"}


def test_a_merged_pr_is_recorded_and_never_followed_by_another(relay, world):
    decide(relay)
    relay.gh.close_pull(UPSTREAM, pulls(relay)[0]["number"], merged=True)
    decide(relay)
    decide(relay)
    assert [p["merged"] for p in pulls(relay)] == [True]
    assert decisions(world) == ["opened", "merged"]


def test_a_backend_with_no_jobs_in_the_window_never_gets_a_pr(relay, world):
    quiet = l3("vendor/quiet-ci", "quiet")
    decide(relay)
    decide(relay)
    assert [p["title"] for p in pulls(relay)] == [TITLE]
    assert decisions(quiet) == ["skipped_no_data"]  # recorded once, when it starts


def test_a_backend_failing_only_with_the_reference_gets_no_pr(relay, world, reference):
    shared = l3("vendor/shared-ci", "shared")
    results(shared, passed=17, shared=3, reference=reference)  # raw 85 %, adjusted 100 %
    decide(relay)
    assert [p["title"] for p in pulls(relay)] == [TITLE]
    assert decisions(shared) == []


def test_github_rate_limiting_the_create_is_retried_without_a_second_pr(relay, world, settings):
    relay.gh.fail("POST", f"/repos/{UPSTREAM}/pulls", status=403, retry_after=1)
    decide(relay)
    assert pulls(relay) == []
    relay.make_due()
    relay.drain()
    assert [p["title"] for p in pulls(relay)] == [TITLE]


def test_a_create_whose_answer_was_lost_is_adopted_not_repeated(relay, world, settings):
    from relay.github import client as github

    settings.GITHUB_HTTP_TIMEOUT = 0.3
    github.reset_http_client()
    relay.gh.fail("POST", f"/repos/{UPSTREAM}/pulls", status=None, delay=0.8)
    decide(relay)
    assert relay.gh.wait_for(lambda gh: gh.requests("POST", f"/repos/{UPSTREAM}/pulls"), timeout=5)
    relay.make_due()
    relay.drain()
    assert len(pulls(relay)) == 1
    assert DemotionPullRequest.objects.get(project=world).number == pulls(relay)[0]["number"]


def test_while_the_pr_is_open_no_new_check_run_is_created_but_an_earlier_one_finishes(relay, world):
    relay.pr("opened", labels=["ciflow/crcr/own"])
    relay.report(world, "in_progress", job="build")
    relay.drain()
    decide(relay)
    relay.report(world, "completed", "success", job="build")
    relay.report(world, "in_progress", job="test", run_id="4243")
    relay.drain()
    assert relay.check_run("crcr/vendor/own-ci/xpu-ci/build")["conclusion"] == "success"
    assert relay.check_runs("crcr/vendor/own-ci/xpu-ci/test") == []
    assert not UpstreamCheckRun.objects.filter(job_name="test").exists()
    suppressed = DemotionDecision.objects.get(project=world, kind="suppressed")
    assert suppressed.upstream_pr == 2 and suppressed.demotion_pr.number == pulls(relay)[0]["number"]


def test_the_open_pr_shows_on_level_status_and_the_backend_page(relay, world, client):
    decide(relay)
    number = pulls(relay)[0]["number"]
    cache.clear()
    [repo] = [r for r in client.get("/api/v1/level-status").json()["repos"] if r["repo"] == "vendor/own-ci"]
    assert repo["demotionPr"] == {
        "number": number,
        "url": f"https://github.com/{UPSTREAM}/pull/{number}",
        "state": "open",
        "branch": BRANCH,
    }
    page = client.get("/crcr/vendor/own-ci").content.decode()
    assert f">#{number}</a>" in page and "open (the repo misses the demotion criteria)" in page


def test_the_sweeper_notices_a_pr_closed_by_hand_without_waiting_for_the_next_decision(relay, world):
    from relay.levels.demotion import demotions_sync_stale

    decide(relay)
    relay.gh.close_pull(UPSTREAM, pulls(relay)[0]["number"])
    DemotionPullRequest.objects.update(synced_at=timezone.now() - timedelta(hours=1))
    assert demotions_sync_stale() == 1
    relay.drain()
    assert [p["state"] for p in pulls(relay)] == ["closed", "open"]
    assert decisions(world) == ["opened", "closed_by_hand", "reopened"]


def test_a_pr_github_no_longer_has_is_opened_again(relay, world):
    decide(relay)
    DemotionPullRequest.objects.filter(project=world).update(number=999)
    decide(relay)
    row = DemotionPullRequest.objects.get(project=world)
    assert row.state == "open" and row.number == pulls(relay)[-1]["number"] != 999


def test_a_pr_for_a_backend_the_registry_moved_meanwhile_is_closed_as_moot(relay, world):
    decide(relay)
    Project.objects.filter(pk=world.pk).update(level="L4")
    decide(relay)
    assert [p["state"] for p in pulls(relay)] == ["closed"]
    assert decisions(world)[:2] == ["opened", "closed_moot"]


def test_when_mains_allowlist_moves_the_branch_is_committed_again_on_top_of_it(relay, world):
    from relay.levels.allowlist_moves import allowlist_demoted

    decide(relay)
    moved_main = relay.gh.file_text(UPSTREAM, PATH).replace("L1: []", "L1:\n  - newcomer/ci")
    relay.gh.add_file(UPSTREAM, PATH, moved_main)
    decide(relay)
    branch = relay.gh.file_text(UPSTREAM, PATH, BRANCH)
    assert branch == allowlist_demoted(moved_main, "vendor/own-ci", "L3")
    assert len(changed_lines(moved_main, branch)) == 3 and len(pulls(relay)) == 1
    assert decisions(world) == ["opened", "refreshed"]


def test_before_the_tallies_are_ready_the_loop_decides_nothing_and_says_why(relay, world, monkeypatch, caplog):
    from relay.levels import status as selectors_levels
    from relay.tallies.buckets import TalliesPending

    def pending(*args, **kwargs):
        raise TalliesPending(0, 1)

    monkeypatch.setattr(selectors_levels, "level_status", pending)
    with caplog.at_level("INFO", logger="relay.levels.tasks"):
        assert demotion_prs_reconcile() == 0
    assert pulls(relay) == [] and decisions(world) == []
    assert "waits for the tallies" in caplog.text
