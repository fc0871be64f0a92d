"""The grid, commit and PR pages: each filter, each state (data, empty, error), htmx partials."""

from unittest import mock

import pytest
from django.db import OperationalError

from tests.factories import (
    DeliveryFactory,
    DispatchFactory,
    FailedTestFactory,
    JobRunFactory,
    ProjectFactory,
    UpstreamCommitFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    ref = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, display_name="OpenReg")
    xpu = ProjectFactory(full_name="intel/torch-xpu-ops", level="L4", display_name="Intel XPU")
    rocm = ProjectFactory(full_name="ROCm/pytorch", level="L3", device="rocm", display_name="AMD ROCm")
    sgl = ProjectFactory(full_name="sgl-project/sglang", level="L1", hardware_kind="ecosystem", display_name="SGLang")
    parent = UpstreamCommitFactory(sha="b" * 40, title="Parent commit (#99)")
    commit = UpstreamCommitFactory(sha="a" * 40, title="Fix the add kernel (#100)", parent_sha=parent.sha)
    head = UpstreamCommitFactory(sha="c" * 40, is_trunk=False, pr_number=100, title="Fix the add kernel")
    JobRunFactory(project=ref, head_sha=commit.sha, conclusion="success", tests_total=50)
    job = JobRunFactory(
        project=xpu,
        head_sha=commit.sha,
        conclusion="failure",
        job_name="test-ops",
        tests_total=50,
        tests_failed=1,
        check_run_id="123456",
        artifact_url="https://example.com/artifacts/1",
    )
    FailedTestFactory(
        job_run=job, classname="TestFooXPU", name="test_add_xpu_float32", message="AssertionError: tensors differ"
    )
    JobRunFactory(project=rocm, head_sha=commit.sha, status="in_progress", conclusion="")
    JobRunFactory(project=xpu, head_sha=head.sha, pr_number=100, conclusion="success")
    DispatchFactory(project=sgl, delivery=DeliveryFactory(head_sha=commit.sha), head_sha=commit.sha, state="sent")
    return {"ref": ref, "xpu": xpu, "rocm": rocm, "sgl": sgl, "commit": commit, "head": head, "job": job}


# --- grid ---------------------------------------------------------------------------------------


def test_the_grid_shows_commits_backends_glyphs_marks_and_a_legend(client, world):
    html = client.get("/").content.decode()
    assert (
        "Fix the add kernel (#100)" in html and 'href="/pr/100"' in html and 'href="/commit/' + "a" * 40 + '"' in html
    )
    assert "OpenReg" in html and "Intel XPU" in html and "SGLang" in html
    assert 'class="c s-failure"' in html and "mk-backend" in html
    assert 'class="hud-legend"' in html and "superseded by a newer head" in html
    assert "https://github.com/pytorch/pytorch/commit/" + "a" * 40 in html


@pytest.mark.parametrize(
    "query, present, absent",
    [
        ("level=L1", ["SGLang"], ["Intel XPU"]),
        ("device=rocm", ["AMD ROCm"], ["Intel XPU"]),
        ("hw=ecosystem", ["SGLang"], ["AMD ROCm"]),
        ("name=xpu", ["Intel XPU"], ["AMD ROCm"]),
        ("name=^intel&regex=1", ["Intel XPU"], ["SGLang"]),
        ("hide_green=1", ["Intel XPU"], ["SGLang"]),
        ("failures=1", ["Fix the add kernel (#100)"], ["Parent commit"]),
        ("heads=pr", ["Fix the add kernel"], ["Parent commit"]),
        ("expand=intel/torch-xpu-ops", ["ci / test-ops", "▼"], []),
    ],
)
def test_each_grid_filter(client, world, query, present, absent):
    html = client.get("/?" + query).content.decode()
    for text in present:
        assert text in html, text
    for text in absent:
        assert text not in html, text


def test_the_filters_state_survives_in_links(client, world):
    html = client.get("/?level=L4&name=xpu&expand=intel/torch-xpu-ops").content.decode()
    assert 'name="level" value="L4" checked' in html and 'value="xpu"' in html
    assert 'hx-get="?level=L4&amp;name=xpu&amp;expand=intel%2Ftorch-xpu-ops"' in html


def test_an_invalid_regex_gives_a_clear_message_not_a_500(client, world):
    response = client.get("/?name=(oops&regex=1")
    assert response.status_code == 200 and "Invalid regular expression" in response.content.decode()


def test_an_empty_store_says_so(client):
    assert "No trunk pushes recorded yet" in client.get("/").content.decode()
    assert "No PR heads recorded yet" in client.get("/?heads=pr").content.decode()


def test_a_failed_query_is_an_error_state_not_an_empty_grid(client, world):
    with mock.patch("hud.views_grid.grid_page", side_effect=OperationalError("database is locked")):
        response = client.get("/")
    html = response.content.decode()
    assert response.status_code == 503 and "Could not load the grid" in html and "The database did not answer" in html
    assert "database is locked" not in html and "OperationalError" not in html and response["Retry-After"] == "60"
    assert "No trunk pushes" not in html


def test_htmx_refreshes_only_the_data_region(client, world):
    response = client.get("/", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert 'id="hud-grid"' in html and "<html" not in html and response["Vary"] == "HX-Request"


def test_a_pinned_cell_tooltip_lists_jobs_attempts_tests_and_links(client, world):
    response = client.get(f"/?tip={'a' * 40}.{world['xpu'].id}")
    html = response.content.decode()
    assert response.status_code == 200
    assert "ci / test-ops" in html and "49/50" not in html and "–/50" not in html
    assert "https://github.com/intel/torch-xpu-ops/actions/runs/" in html and "/job/123456" in html
    assert "https://example.com/artifacts/1" in html and "TestFooXPU.test_add_xpu_float32" in html
    assert "backend-specific" in html


def test_a_tooltip_for_an_unknown_cell_says_so(client, world):
    assert client.get("/?tip=nonsense").status_code == 404
    assert "No such cell" in client.get(f"/?tip={'a' * 40}.999999").content.decode()


# --- commit -------------------------------------------------------------------------------------


def test_the_commit_page_shows_every_backend_and_the_baseline_comparison(client, world):
    html = client.get("/commit/" + "a" * 12).content.decode()
    assert "Fix the add kernel (#100)" in html and "Baseline comparison" in html
    assert "TestFoo.test_add_float32" in html and "Backend-specific" in html
    for name in ("OpenReg", "Intel XPU", "AMD ROCm", "SGLang"):
        assert name in html
    assert "AssertionError: tensors differ" in html and 'href="/commit/' + "b" * 40 + '"' in html
    assert 'href="/pr/100"' in html and "https://github.com/pytorch/pytorch/pull/100" in html


def test_the_commit_page_flags_an_upstream_broken_commit(client, world):
    JobRunFactory(project=world["ref"], head_sha="a" * 40, conclusion="failure", job_name="build", tests_total=None)
    html = client.get("/commit/" + "a" * 40).content.decode()
    assert "Upstream broken" in html
    assert "upstream broken" in client.get("/").content.decode()


def test_a_reference_failure_a_known_issue_accounts_for_reads_known_not_upstream_broken(client, world):
    from relay.models import KnownIssue

    issue = KnownIssue.objects.create(title="add broken upstream", kind="upstream", test_patterns=["TestFoo.test_add*"])
    ref_job = JobRunFactory(project=world["ref"], head_sha="a" * 40, conclusion="failure", job_name="t", tests_total=9)
    FailedTestFactory(job_run=ref_job, classname="TestFooPRIVATEUSE1", name="test_add_privateuse1_float32")
    html = client.get("/commit/" + "a" * 40).content.decode()
    assert "Upstream broken" not in html and 'data-upstream-broken="false"' in html
    assert "Known upstream breakage" in html and f"/known-issues/{issue.pk}" in html
    assert f'<tr data-sha="{"a" * 40}" class="broken">' not in client.get("/").content.decode()


def test_the_commit_page_says_where_the_references_per_test_results_came_from(client, world):
    JobRunFactory(
        project=world["ref"],
        head_sha="a" * 40,
        job_name="test (openreg, 1, 1, linux.2xlarge)",
        conclusion="success",
        ended_by="imported",
        tests_total=9,
        tests_passed=9,
        tests_source="s3",
    )
    html = client.get("/commit/" + "a" * 40).content.decode()
    assert """per-test results were read from upstream's <span class="tests-source">S3 test reports</span>""" in html
    assert html.count("via S3 test reports") == 1, "on the reference's job row only"


def test_the_commit_page_names_no_source_for_callback_results(client, world):
    assert "tests-source" not in client.get("/commit/" + "a" * 40).content.decode()


def test_the_commit_page_says_no_baseline_without_a_reference_result(client, world):
    html = client.get("/commit/" + "b" * 40).content.decode()
    assert "No baseline:" in html


def test_an_unknown_commit_is_a_404_that_says_so(client, world):
    response = client.get("/commit/1234567")
    assert response.status_code == 404 and "No upstream commit or job result matches" in response.content.decode()


def test_a_failed_commit_query_is_an_error_state(client, world):
    with mock.patch("hud.views_grid.commit_detail", side_effect=OperationalError("disk I/O error")):
        response = client.get("/commit/" + "a" * 40)
    assert response.status_code == 503 and "Could not load this commit" in response.content.decode()


# --- PR -----------------------------------------------------------------------------------------


def test_the_pr_page_has_a_row_per_head_a_summary_and_the_gate(client, world):
    JobRunFactory(project=world["xpu"], head_sha="d" * 40, pr_number=100, conclusion="failure")
    html = client.get("/pr/100").content.decode()
    assert html.count('data-sha="') == 3 and "backends passed" in html  # two heads, and the commit it landed as
    assert "crcr/gate: failure" in html and "https://github.com/pytorch/pytorch/pull/100" in html


def test_a_relayed_pr_names_the_trunk_commit_it_landed_as_with_its_results(client, world):
    """Issue 50 item 6: a PR that landed says as which trunk commit, and that commit's results."""
    html = client.get("/pr/100").content.decode()
    assert 'data-landed-sha="' + "a" * 40 + '"' in html and "Landed as trunk commit" in html
    row = html[html.index('<tr data-sha="' + "a" * 40 + '" class="landed') :]
    assert "landed on trunk" in row[: row.index("</tr>")] and "Fix the add kernel (#100)" in row


def test_a_landed_pr_the_relay_never_saw_answers_with_its_trunk_commit(client, world):
    """Issue 50 item 6: a trunk commit's PR link, `(#99)` in its title, answers though no event
    of PR 99 itself reached the relay (a ghstack stack, a direct land): page and API alike."""
    response = client.get("/pr/99")
    html = response.content.decode()
    assert response.status_code == 200 and "No head SHA is recorded" not in html
    assert 'data-landed-sha="' + "b" * 40 + '"' in html and "a stack or a direct land" in html
    body = client.get("/api/v1/prs/99").json()
    assert body["heads"] == [] and body["landed"]["sha"] == "b" * 40
    assert body["landed"]["title"] == "Parent commit (#99)" and "intel/torch-xpu-ops" in body["landed"]["backends"]
    relayed = client.get("/api/v1/prs/100").json()
    assert relayed["landed"]["sha"] == "a" * 40 and relayed["landed"]["backends"]["intel/torch-xpu-ops"] == "failure"


def test_an_unknown_pr_is_a_404_that_says_so(client, world):
    response = client.get("/pr/4242")
    assert response.status_code == 404 and "No head SHA is recorded for PR #4242" in response.content.decode()


def test_a_failed_pr_query_is_an_error_state(client, world):
    with mock.patch("hud.views_grid.pr_page", side_effect=OperationalError("gone")):
        response = client.get("/pr/100")
    assert response.status_code == 503 and "Could not load PR #100" in response.content.decode()


# --- speed --------------------------------------------------------------------------------------


def test_a_50_commit_by_40_backend_grid_takes_a_fixed_handful_of_queries(client, django_assert_max_num_queries):
    """The page's cost grows with the page (10,000 attempts here), never with the table: the
    jobs come from the (head_sha, project) index. Its speed is measured by `make bench`, not
    here (docs/performance.md)."""
    from relay.models import JobRun

    projects = [ProjectFactory(level=("L4", "L3", "L2", "L2", "L1")[i % 5], is_reference=i == 2) for i in range(40)]
    commits = [UpstreamCommitFactory() for _ in range(50)]
    JobRun.objects.bulk_create(
        JobRunFactory.build(
            project=p,
            head_sha=c.sha,
            job_name=f"shard-{j}",
            conclusion="failure" if (i + j) % 37 == 0 else "success",
            tests_total=100,
        )
        for c in commits
        for i, p in enumerate(projects)
        if p.level != "L1"
        for j in range(6)
    )
    with django_assert_max_num_queries(10):
        assert client.get("/").status_code == 200


def test_every_registered_backend_is_a_column_before_any_trunk_result(client):
    """A backend with only PR results (or none yet) still has its column on `/`."""
    pr_only = ProjectFactory(full_name="pytorch-mps/mps-ci", display_name="Apple MPS")
    UpstreamCommitFactory(sha="c" * 40, is_trunk=False, pr_number=7)
    JobRunFactory(project=pr_only, head_sha="c" * 40, pr_number=7)
    html = client.get("/").content.decode()
    assert 'id="hud-grid"' in html and "Apple MPS" in html
    assert "No trunk pushes recorded yet" in html and "Every registered backend has its column already" in html


def test_the_htmx_refresh_of_an_empty_grid_keeps_the_columns_and_the_reason(client):
    ProjectFactory(full_name="pytorch-mps/mps-ci", display_name="Apple MPS")
    html = client.get("/", HTTP_HX_REQUEST="true").content.decode()
    assert "Apple MPS" in html and "No trunk pushes recorded yet" in html and "<html" not in html
