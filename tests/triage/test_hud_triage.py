"""Known and expected failures on the HUD: the grid's mark, the commit page's counts (which
exclude them and say how many), the tooltip's "mark as known", suggested issues for a failure
shared by two backends, and expected failures that keep passing."""

import pytest

from relay.models import KnownIssue
from relay.triage import issues
from relay.triage.expectations import expectations_replace

from .conftest import ROCM_ADDMM, XPU_ADDMM, XPU_SUM, make_trunk, result

pytestmark = pytest.mark.django_db


def make_issue(**fields):
    return issues.known_issue_create(
        {"title": "addmm OOM", "test_patterns": ["TestCommon.test_addmm*"], **fields}, by="alice", may_unblock=True
    )


def grid_mark(sha, project):
    from relay.results.baseline import baseline_marks

    return baseline_marks([sha]).get((sha, project.pk))


def test_a_failure_matching_an_open_known_issue_is_marked_known(backends, trunk):
    result(backends["ref"], trunk[0].sha)
    result(backends["xpu"], trunk[0].sha, [XPU_ADDMM])
    assert grid_mark(trunk[0].sha, backends["xpu"]) == "backend"
    issue = make_issue()
    assert grid_mark(trunk[0].sha, backends["xpu"]) == "known"
    issues.known_issue_update(issue, {"state": "resolved"})
    assert grid_mark(trunk[0].sha, backends["xpu"]) == "backend"


def test_a_cell_with_a_known_and_an_unknown_failure_keeps_the_baseline_mark_of_the_unknown_one(backends, trunk):
    result(backends["ref"], trunk[0].sha)
    result(backends["xpu"], trunk[0].sha, [XPU_ADDMM, XPU_SUM])
    make_issue()
    assert grid_mark(trunk[0].sha, backends["xpu"]) == "backend"


def test_a_failure_the_backend_expects_is_marked_expected_and_is_not_red(backends, trunk, client):
    result(backends["ref"], trunk[0].sha)
    result(backends["xpu"], trunk[0].sha, [XPU_ADDMM])
    expectations_replace(backends["xpu"], "TestCommon.test_addmm_float32,Fail\n", by="intel-ci")
    assert grid_mark(trunk[0].sha, backends["xpu"]) == "expected"
    html = client.get("/").content.decode()
    assert f'class="c s-failure xp" data-p="{backends["xpu"].pk}"' in html


def test_the_commit_page_counts_exclude_known_failures_and_say_how_many(backends, trunk, client):
    from relay.results.baseline import commit_baseline

    result(backends["ref"], trunk[0].sha)
    result(backends["xpu"], trunk[0].sha, [XPU_ADDMM, XPU_SUM])
    make_issue(url="https://github.com/intel/torch-xpu-ops/issues/1234")
    xpu = commit_baseline(trunk[0].sha).for_backend(backends["xpu"].pk)
    assert [t.test_id for t in xpu.backend_only] == ["test_reductions.TestReductions.test_sum_float16"]
    assert [(t.test_id, t.known_as) for t in xpu.known] == [("test_ops.TestCommon.test_addmm_float32", "known")]
    html = client.get(f"/commit/{trunk[0].sha}").content.decode()
    assert "1 excluded" in html and "https://github.com/intel/torch-xpu-ops/issues/1234" in html


def test_the_tooltip_offers_mark_as_known_prefilled_from_the_failure(backends, trunk, client):
    result(backends["xpu"], trunk[0].sha, [XPU_SUM])
    html = client.get("/", {"tip": f"{trunk[0].sha}.{backends['xpu'].pk}"}).content.decode()
    assert "mark as known" in html
    assert "pattern=test_reductions.TestReductions.test_sum_float16" in html and f"project={backends['xpu'].pk}" in html


def test_the_pr_page_leaves_known_failures_out_of_what_the_pr_broke(backends, trunk):
    """Only an issue an admin marked as not blocking the gate excuses a failure from the PR's
    verdict (which the gate enforces): any other is judged like every failure."""
    from relay.models import PullRequest
    from relay.results.blame import pr_blame

    issue = make_issue()
    pr = PullRequest.objects.create(number=7, base_sha=trunk[5].sha, head_sha="e" * 40)
    result(backends["ref"], "e" * 40, pr_number=7)
    result(backends["xpu"], "e" * 40, [XPU_ADDMM], pr_number=7)
    [blame] = pr_blame("e" * 40, pr, [backends["ref"], backends["xpu"]])
    assert blame.headline == "1 backend-only (new; the reference passes)" and blame.blocks
    issue.blocks_gate = False
    issue.save()
    [blame] = pr_blame("e" * 40, pr, [backends["ref"], backends["xpu"]])
    assert blame.headline == "1 known or expected (excluded)" and not blame.blocks


def test_a_failure_shared_by_two_backends_without_an_issue_is_suggested_with_its_culprit_range(backends, trunk):
    from hud.selectors_triage import suggestions

    for i, commit in enumerate(trunk):
        result(backends["ref"], commit.sha)
        result(backends["xpu"], commit.sha, [XPU_ADDMM] if i >= 3 else [])
        result(backends["rocm"], commit.sha, [ROCM_ADDMM] if i >= 3 else [])
    [suggestion] = suggestions()
    assert suggestion.pattern == "test_ops.TestCommon.test_addmm_float32"
    assert {p.full_name for p in suggestion.backends} == {"intel/torch-xpu-ops", "ROCm/pytorch"}
    assert all(
        s.first_failing.sha == trunk[3].sha and s.last_passing.sha == trunk[2].sha for _, s in suggestion.streaks
    )
    make_issue()
    assert suggestions() == []


def test_an_expected_failure_that_keeps_passing_is_flagged(backends, settings):
    from hud.selectors_triage import expectation_rows, unexpectedly_passing

    settings.CRCR_EXPECTATION_PASSES = 3
    commits = make_trunk(4)
    expectations_replace(backends["xpu"], "TestCommon.test_addmm*,Fail\nTestReductions.test_sum*,Fail\n", by="intel-ci")
    for i, commit in enumerate(commits):
        result(backends["xpu"], commit.sha, [XPU_SUM] + ([XPU_ADDMM] if i == 0 else []))
    rows = {r.expectation.pattern: r for r in expectation_rows(backends["xpu"])}
    assert rows["TestCommon.test_addmm*"].passing_streak == 3 and rows["TestCommon.test_addmm*"].unexpectedly_passing
    assert not rows["TestReductions.test_sum*"].unexpectedly_passing
    assert [r.expectation.pattern for r in unexpectedly_passing([backends["xpu"]])] == ["TestCommon.test_addmm*"]


def test_marking_as_known_needs_a_signed_in_maintainer(backends, client, django_user_model):
    response = client.get("/known-issues/new?pattern=TestCommon.test_addmm")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    client.force_login(django_user_model.objects.create_user("bob", "bob@example.org", "x" * 20))
    assert client.get("/known-issues/new").status_code == 403


def test_a_maintainer_makes_a_known_issue_from_the_prefilled_form(backends, trunk, client, django_user_model):
    admin = django_user_model.objects.create_superuser("alice", "alice@example.org", "x" * 20)
    client.force_login(admin)
    form = client.get(
        f"/known-issues/new?pattern=TestCommon.test_addmm_float32&project={backends['xpu'].pk}&title=addmm+fails"
    ).content.decode()
    assert "TestCommon.test_addmm_float32" in form
    response = client.post(
        "/known-issues/new",
        {
            "title": "addmm fails",
            "kind": "product",
            "test_patterns": "TestCommon.test_addmm_float32",
            "projects": [backends["xpu"].pk],
            "blocks_gate": "on",
        },
    )
    issue = KnownIssue.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/known-issues/{issue.pk}"
    assert list(issue.projects.all()) == [backends["xpu"]] and not issue.all_backends
    assert client.get(f"/known-issues/{issue.pk}").status_code == 200


def test_a_bad_pattern_in_the_form_is_a_400_with_the_reason(client, django_user_model):
    client.force_login(django_user_model.objects.create_superuser("alice", "alice@example.org", "x" * 20))
    response = client.post(
        "/known-issues/new", {"title": "t", "kind": "product", "test_patterns": "*", "all_backends": "on"}
    )
    assert response.status_code == 400 and "would match every test" in response.content.decode()


def test_the_known_issue_page_lists_occurrences_and_flags_a_resolved_issue_still_occurring(backends, trunk, client):
    issue = make_issue()
    issues.occurrences_record(result(backends["xpu"], trunk[0].sha, [XPU_ADDMM]).pk)
    issues.known_issue_update(issue, {"state": "resolved"})
    issues.occurrences_record(result(backends["rocm"], trunk[1].sha, [ROCM_ADDMM]).pk)
    html = client.get(f"/known-issues/{issue.pk}").content.decode()
    assert "Still occurring" in html and "Intel XPU" in html and "AMD ROCm" in html
    assert "still occurring (1 since resolved)" in client.get("/known-issues?state=resolved").content.decode()


def test_the_backend_dashboard_shows_its_expectations_and_known_failures_beside_readiness(backends, settings, client):
    settings.CRCR_EXPECTATION_PASSES = 2
    commits = make_trunk(3)
    expectations_replace(backends["xpu"], "TestCommon.test_addmm*,Fail   # OOM on the runner\n", by="intel-ci")
    for i, commit in enumerate(commits):
        result(backends["ref"], commit.sha)
        result(backends["xpu"], commit.sha, [XPU_ADDMM] if i == 0 else [])
    html = client.get("/crcr/intel/torch-xpu-ops?range=30d").content.decode()
    assert "Published expectations" in html and "OOM on the runner" in html and "unexpectedly passing" in html
    assert "failed only with them" in html and "no known issue or expectation hides" in html
