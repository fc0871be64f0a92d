"""Hardware variants inside one backend (relay.results.variants, Project.variant_keys; issue 53
item 5): the commit page shows them per job and marks a failure on one variant only, and a cell
failing on one variant alone says so on the grid, its tooltip, the backend page and the commit
page (the API's side: tests/api/test_variants.py)."""

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from relay.models import FailedTest, JobRun, Project, UpstreamCommit
from relay.results.grid import commit_cells
from relay.results.variants import job_variants, only_variant, variant_of
from tests.factories import FailedTestFactory, JobRunFactory, ProjectFactory, UpstreamCommitFactory

# The callback's optional `workflow.environment`, as ROCm's jobs would send it.
MI300 = {"device": "MI300", "os": "ubuntu-22.04", "sdk": "rocm-6.4", "python": "3.12"}
MI250 = {"device": "MI250", "os": "ubuntu-22.04", "sdk": "rocm-6.4", "python": "3.12"}


def test_a_job_s_variant_is_its_declared_keys_in_order():
    assert variant_of(MI300, ["device"]) == "MI300"
    assert variant_of(MI300, ["os", "device"]) == "ubuntu-22.04 · MI300"
    assert variant_of(MI300, []) == ""
    assert variant_of({"device": "  "}, ["device"]) == ""
    assert variant_of({}, ["device", "os"]) == ""
    assert variant_of(None, ["device"]) == ""


def test_a_failure_is_one_variant_s_only_when_several_reported_and_one_fails_it():
    assert only_variant({"MI300"}, {"MI300", "MI250"}) == "MI300"
    assert only_variant({"MI300", "MI250"}, {"MI300", "MI250"}) == ""
    assert only_variant({"MI300"}, {"MI300"}) == ""
    assert only_variant({""}, {"", "MI250"}) == ""


@pytest.mark.parametrize("keys", [["gpu"], ["device", "device"], "device", [1], [["device"]]])
def test_only_distinct_known_keys_are_declared(keys):
    with pytest.raises(ValidationError):
        Project(full_name="ROCm/pytorch", variant_keys=keys).clean_fields()


@pytest.mark.django_db
def test_job_variants_read_the_stored_environment():
    rocm = ProjectFactory(full_name="ROCm/pytorch", variant_keys=["device"])
    a = JobRunFactory(project=rocm, environment=MI300)
    b = JobRunFactory(project=rocm, environment={})
    assert job_variants(rocm, [a.id, b.id]) == {a.id: "MI300", b.id: ""}


@pytest.fixture
def rocm_commit():
    rocm = ProjectFactory(full_name="ROCm/pytorch", display_name="AMD ROCm", variant_keys=["device"])
    commit = UpstreamCommitFactory(sha="d" * 40)
    reference = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, display_name="OpenReg")
    JobRunFactory(project=reference, head_sha=commit.sha, conclusion="success", tests_total=50)
    jobs = {}
    for env in (MI300, MI250):
        jobs[env["device"]] = JobRunFactory(
            project=rocm,
            head_sha=commit.sha,
            conclusion="failure",
            job_name=f"test ({env['device']})",
            environment=env,
            tests_total=10,
            tests_failed=1,
        )
    for device, name in (
        ("MI300", "test_add_cuda_float32"),
        ("MI300", "test_mul_cuda_float32"),
        ("MI250", "test_mul_cuda_float32"),
    ):
        FailedTestFactory(job_run=jobs[device], name=name, classname="test_ops.TestCommonCUDA")
    return rocm, commit, jobs


@pytest.mark.django_db
def test_the_commit_page_shows_each_job_s_variant_and_a_failure_on_one_only(client, rocm_commit):
    html = client.get("/commit/" + "d" * 40).content.decode()
    assert '<span class="badge variant" title="hardware variant">MI300</span>' in html
    assert '<span class="badge variant" title="hardware variant">MI250</span>' in html
    # test_add, in the job's list and in the baseline comparison; test_mul fails on both
    assert html.count("fails on MI300 only") == 2
    baseline = html.split('id="baseline"', 1)[1].split('id="multi"', 1)[0]
    assert baseline.count("fails on MI300 only") == 1
    assert "fails on MI250 only" not in html


@pytest.mark.django_db
def test_a_variant_still_running_leaves_no_only_mark(client, rocm_commit):
    rocm, commit, jobs = rocm_commit
    mi250_still_running(rocm, commit)
    html = client.get("/commit/" + "d" * 40).content.decode()
    assert "variant-only" not in html


@pytest.mark.django_db
def test_without_declared_keys_a_backend_has_one_variant(client, rocm_commit):
    rocm, _, _ = rocm_commit
    Project.objects.filter(pk=rocm.pk).update(variant_keys=[])
    html = client.get("/commit/" + "d" * 40).content.decode()
    assert "badge variant" not in html and "variant-only" not in html


# --- a cell failing on one variant alone: the grid, its tooltip, the backend page, the API -------


@pytest.fixture
def mi300_alone(rocm_commit):
    """MI250 passes the commit: every failure of ROCm's cell is MI300's."""
    rocm, commit, jobs = rocm_commit
    JobRun.objects.filter(pk=jobs["MI250"].pk).update(conclusion="success", tests_failed=0)
    FailedTest.objects.filter(job_run=jobs["MI250"]).delete()
    return rocm, commit, jobs


def _cell_alone(rocm, commit) -> str:
    return commit_cells([commit.sha], [rocm]).variant_only(commit.sha, rocm.id)


@pytest.mark.django_db
def test_a_cell_whose_failing_jobs_are_all_one_variant_s_fails_on_it_alone(mi300_alone):
    rocm, commit, _ = mi300_alone
    assert _cell_alone(rocm, commit) == "MI300"


@pytest.mark.django_db
def test_a_cell_failing_on_both_variants_names_neither(rocm_commit):
    rocm, commit, _ = rocm_commit
    assert _cell_alone(rocm, commit) == ""


@pytest.mark.django_db
def test_a_cell_with_a_variant_still_running_names_none(mi300_alone):
    rocm, commit, _ = mi300_alone
    mi250_still_running(rocm, commit)
    assert _cell_alone(rocm, commit) == ""


@pytest.mark.django_db
def test_the_grid_cell_says_which_variant_fails_alone(client, mi300_alone):
    rocm, commit, _ = mi300_alone
    UpstreamCommit.objects.filter(pk=commit.pk).update(is_trunk=True, landed_at=timezone.now())
    html = client.get("/").content.decode()
    cell = html.split(f'data-p="{rocm.id}"', 1)[1].split("</td>", 1)[0]
    assert "fails on MI300 only" in cell and '<i class="vo" aria-hidden="true">' in cell


@pytest.mark.django_db
def test_the_cell_tooltip_names_each_job_s_variant_and_the_variant_failing_alone(client, mi300_alone):
    rocm, commit, _ = mi300_alone
    html = client.get(f"/?tip={commit.sha}.{rocm.id}").content.decode()
    head = html.split('class="tip-state"', 1)[1].split("</p>", 1)[0]
    assert "fails on MI300 only" in head
    assert '<span class="badge variant" title="hardware variant">MI250</span>' in html
    assert html.count("fails on MI300 only") == 3, "the cell and each of its two failed tests"


@pytest.mark.django_db
def test_the_backend_page_says_which_variant_a_head_fails_on_alone(client, mi300_alone):
    html = client.get("/crcr/ROCm/pytorch").content.decode()
    assert "fails on MI300 only" in html


@pytest.mark.django_db
def test_the_commit_page_says_it_of_the_backend_too(client, mi300_alone):
    rocm, _, _ = mi300_alone
    html = client.get("/commit/" + "d" * 40).content.decode()
    summary = html.split(f'id="backend-{rocm.id}"', 1)[1].split("</summary>", 1)[0]
    assert "fails on MI300 only" in summary


def mi250_still_running(rocm, commit):
    """A second MI250 job of the commit, not finished yet."""
    return JobRunFactory(
        project=rocm,
        head_sha=commit.sha,
        status="in_progress",
        conclusion="",
        job_name="test (MI250) 2",
        environment=MI250,
    )
