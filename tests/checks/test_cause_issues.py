"""Issues filed in a backend's repository for the causes that matter, through the App and the
outbox, against the stand-in: opened when a cause crosses its threshold, updated as it grows,
closed only after it stays off trunk for days, never reopened on the failures it closed on."""

import random
from datetime import timedelta

import pytest
from django.utils import timezone

from relay.checks.cause_issues import cause_issues_sweep
from relay.models import CauseIssue, CauseIssuePolicy, UpstreamWrite
from relay.teststore.causes import causes_sweep
from relay.teststore.store import store_sweep
from tests.factories import UpstreamCommitFactory
from tests.relay.causes.conftest import FFT, failing, ran

pytestmark = pytest.mark.django_db
XPU = "intel/torch-xpu-ops"


@pytest.fixture
def xpu(relay):
    project = relay.backend(XPU, "L2", device_type="xpu", display_name="Intel XPU")
    CauseIssuePolicy.objects.create(project=project, enabled=True)
    return project


def failing_commit(project, landed_at, tests: int, message: str = FFT.format(key="XPU"), attempt: int = 1):
    commit = UpstreamCommitFactory(landed_at=landed_at, is_trunk=True)
    ran(project, commit, [failing("XPU", "xpu", f"test_fft_{i}", message) for i in range(tests)], attempt)
    store_sweep(now=landed_at + timedelta(minutes=5))
    causes_sweep()
    return commit


def sweep(relay, now) -> None:
    cause_issues_sweep(now)
    relay.drain()


def test_a_cause_on_three_trunk_commits_opens_an_issue_in_the_backends_repo(relay, xpu):
    now = timezone.now()
    first = failing_commit(xpu, now - timedelta(hours=5), 2)
    failing_commit(xpu, now - timedelta(hours=4), 2)
    sweep(relay, now)
    assert relay.gh.issues == [], "two trunk commits and two tests: below the threshold"
    failing_commit(xpu, now - timedelta(hours=3), 2)
    sweep(relay, now)
    [issue] = relay.gh.issues
    assert (issue["repo"], issue["state"], issue["title"]) == (XPU, "open", "[CRCR] missing operator aten::_fft_c2c")
    assert "`NotImplementedError: aten::_fft_c2c`" in issue["body"] and f"`{first.sha[:12]}`" in issue["body"]
    assert "2 tests on 3 trunk commits" in issue["body"] and "not failing through it" in issue["body"]
    [call] = relay.writes_to("POST", rf"/repos/{XPU}/issues")
    assert call.headers["authorization"], "sent with the backend's installation token"
    row = CauseIssue.objects.get()
    assert (row.number, row.html_url) == (issue["number"], f"https://github.com/{XPU}/issues/{issue['number']}")


def test_twenty_tests_on_one_commit_open_one_too(relay, xpu):
    now = timezone.now()
    failing_commit(xpu, now - timedelta(hours=1), 20)
    sweep(relay, now)
    assert [i["state"] for i in relay.gh.issues] == ["open"]


def test_a_backend_that_did_not_opt_in_gets_no_issue(relay, xpu):
    CauseIssuePolicy.objects.update(enabled=False)
    now = timezone.now()
    failing_commit(xpu, now - timedelta(hours=1), 25)
    sweep(relay, now)
    assert relay.gh.issues == [] and not UpstreamWrite.objects.filter(kind="cause_issue").exists()


def test_the_issue_grows_then_closes_only_after_days_off_trunk_and_does_not_reopen(relay, xpu):
    now = timezone.now()
    failing_commit(xpu, now - timedelta(hours=2), 20)
    sweep(relay, now)
    failing_commit(xpu, now - timedelta(hours=1), 24, attempt=2)
    sweep(relay, now)
    [issue] = relay.gh.issues
    assert "24 tests on 2 trunk commits" in issue["body"], "updated as it grew"
    assert len(relay.writes_to("PATCH", rf"/repos/{XPU}/issues/{issue['number']}")) == 1
    sweep(relay, now)
    assert len(relay.writes_to("PATCH", rf"/repos/{XPU}/issues/\d+")) == 1, "unchanged: nothing sent"
    sweep(relay, now + timedelta(days=1, hours=1))  # off trunk for a day: below, not yet closed
    sweep(relay, now + timedelta(days=3))
    assert relay.gh.issues[0]["state"] == "open"
    sweep(relay, now + timedelta(days=4, hours=2))
    [issue] = relay.gh.issues
    assert (issue["state"], issue["state_reason"]) == ("closed", "completed")
    assert "Closed: not failing on trunk for 3 days." in issue["body"]
    sweep(relay, now + timedelta(days=4, hours=3))  # the 7-day window still holds the old failures
    assert relay.gh.issues[0]["state"] == "closed"


def test_a_failure_on_trunk_again_keeps_it_open(relay, xpu):
    now = timezone.now()
    failing_commit(xpu, now - timedelta(days=2, hours=1), 20)
    sweep(relay, now - timedelta(days=2))
    sweep(relay, now)  # off trunk for two days
    failing_commit(xpu, now + timedelta(hours=1), 1, attempt=2)
    sweep(relay, now + timedelta(days=1, hours=1))
    assert relay.gh.issues[0]["state"] == "open"
    assert CauseIssue.objects.get().below_since is None


def test_mentions_and_markup_in_a_failure_reach_github_inert(relay, xpu):
    now = timezone.now()
    message = "RuntimeError: ping @pytorch/xpu-team see <img src=x> [link](http://evil.example)"
    failing_commit(xpu, now - timedelta(hours=1), 20, message)
    sweep(relay, now)
    [issue] = relay.gh.issues
    assert issue["title"] == "[CRCR] RuntimeError: ping \uff20<path> see <img src=x> [link](<url>)"
    assert "- **Cause:** `RuntimeError: ping @<path> see <img src=x> [link](<url>)`" in issue["body"].splitlines()


def test_a_retry_after_a_lost_answer_adopts_the_issue_instead_of_opening_a_second(relay, xpu):
    from relay.github import client as github
    from relay.github.installations import installation_id_for

    now = timezone.now()
    failing_commit(xpu, now - timedelta(hours=1), 20)
    relay.gh.fail("POST", rf"/repos/{XPU}/issues", status=502)
    sweep(relay, now)
    row = CauseIssue.objects.get()
    assert row.number is None and UpstreamWrite.objects.get(kind="cause_issue").state == "retrying"
    # The lost try had landed: the issue is there, with the relay's marker.
    landed = {"title": "[CRCR] missing operator aten::_fft_c2c", "body": f"…\n<!-- crcr-cause-issue:{row.pk} -->"}
    number = github.as_installation(installation_id_for(XPU), "POST", f"/repos/{XPU}/issues", json=landed).json[
        "number"
    ]
    UpstreamWrite.objects.update(next_attempt_at=now)
    relay.drain()
    assert len(relay.gh.issues) == 1 and CauseIssue.objects.get().number == number
    assert relay.writes_to("PATCH", rf"/repos/{XPU}/issues/{number}")


def test_the_sandbox_backend_s_missing_operator_crosses_its_threshold_and_gets_its_issue(relay):
    from devtools.sandbox_triage import CAUSE_ISSUES_FOR
    from devtools.standin.sandbox import JobPlan

    [repo] = CAUSE_ISSUES_FOR
    project = relay.backend(repo, "L3", device="qnn")
    CauseIssuePolicy.objects.create(project=project, enabled=True)
    now, fields = timezone.now(), {"name", "classname", "file", "message", "stacktrace", "outcome", "hw_classification"}
    healthy = (
        f"{n:040x}"
        for n in range(500)
        if not JobPlan({"full_name": "x"}, {"payload": {"after": f"{n:040x}"}}).upstream_broken
    )
    for hours, sha in zip((3, 2, 1), healthy, strict=False):
        plan = JobPlan({"full_name": repo, "level": "L3"}, {"payload": {"after": sha}})
        plan.rng = random.Random(hours)  # the plan seeds its draws from the clock
        tests = [{k: v for k, v in t.items() if k in fields} for t in plan.failed_tests()]
        commit = UpstreamCommitFactory(sha=sha, landed_at=now - timedelta(hours=hours), is_trunk=True)
        ran(project, commit, tests)
        store_sweep(now=commit.landed_at + timedelta(minutes=5))
        causes_sweep()
    sweep(relay, now)
    titles = [i["title"] for i in relay.gh.issues]
    assert "[CRCR] missing operator aten::_linalg_eigvals" in titles


# --- causes the reference shares ----------------------------------------------------------------------


SHARED = "IndexError: index {n} is out of bounds for dimension 0 with size 2"


def reference_fails(relay, commit, message: str, tests: int = 1):
    reference = relay.backend("pytorch/openreg-ci", "L2", is_reference=True)
    ran(reference, commit, [failing("PrivateUse1", "openreg", f"test_fft_{i}", message) for i in range(tests)])
    store_sweep(now=commit.landed_at + timedelta(minutes=5))
    causes_sweep()


def test_a_reason_the_reference_shares_files_no_issue_in_the_backends_repo(relay, xpu):
    now = timezone.now()
    commits = [failing_commit(xpu, now - timedelta(hours=h), 20, SHARED.format(n=h)) for h in (3, 2, 1)]
    reference_fails(relay, commits[0], SHARED.format(n=9))
    sweep(relay, now)
    assert relay.gh.issues == [] and not CauseIssue.objects.exists(), "upstream's bug: no backend can fix it"


def test_a_missing_operator_the_reference_lacks_too_is_still_the_backends_issue_and_says_so(relay, xpu):
    now = timezone.now()
    commit = failing_commit(xpu, now - timedelta(hours=1), 20)
    reference_fails(relay, commit, FFT.format(key="PrivateUse1"), tests=2)
    sweep(relay, now)
    [issue] = relay.gh.issues
    assert issue["title"] == "[CRCR] missing operator aten::_fft_c2c"
    assert "lacks it too (2 tests): the operator is this backend's to implement" in issue["body"]


def test_a_shorter_day_opens_and_closes_within_minutes_as_the_sandbox_shows_it(relay, xpu, settings):
    settings.CRCR_CAUSE_ISSUE_DAY_SECONDS = 120
    now = timezone.now()
    failing_commit(xpu, now - timedelta(minutes=3), 20)
    sweep(relay, now)
    assert relay.gh.issues[0]["state"] == "open" and "a day here lasts 120 s" in relay.gh.issues[0]["body"]
    sweep(relay, now + timedelta(minutes=3))  # off trunk for two minutes: below since now
    sweep(relay, now + timedelta(minutes=8))
    assert relay.gh.issues[0]["state"] == "open", "five minutes below: not yet the three days of six"
    sweep(relay, now + timedelta(minutes=10))
    assert relay.gh.issues[0]["state"] == "closed"


def test_the_cause_s_page_and_api_link_the_issue_filed_for_it(relay, xpu, client):
    now = timezone.now()
    failing_commit(xpu, now - timedelta(hours=1), 20)
    sweep(relay, now)
    row = CauseIssue.objects.get()
    page = client.get(f"/causes/{row.cause_id}").content.decode()
    assert f'href="https://github.com/{XPU}/issues/{row.number}"' in page and "20 tests on 1 trunk commit" in page
    [filed] = client.get(f"/api/v1/causes/{row.cause_id}").json()["filed_issues"]
    assert (filed["backend"], filed["number"], filed["state"]) == (XPU, row.number, "open")
