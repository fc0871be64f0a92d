"""Importing the OpenReg reference from upstream CI, against the stand-in over HTTP."""

import io
import zipfile
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from relay.models import JobRun
from relay.reference.imports import reference_import, shas_to_import
from tests.factories import ProjectFactory
from tests.relay.unittest_producer import PYTORCH_OPENREG_LOG, github_log, unittest_verbose_output

pytestmark = pytest.mark.django_db
JUNIT = Path(__file__).resolve().parent.parent / "fixtures" / "junit"
SHA = "ab" * 20
UPSTREAM = "pytorch/pytorch"


def zipped(*names: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name in names:
            archive.write(JUNIT / name, f"test-reports/python-pytest/{name}")
    return buffer.getvalue()


@pytest.fixture
def upstream(standin, relay_settings):
    standin.add_installation(installation_id=1, account="pytorch")
    standin.add_repo(UPSTREAM, repo_id=65600975, installation_id=1)
    return standin


@pytest.fixture
def reference(db):
    return ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, hardware_kind="reference")


def openreg_job(name="test (openreg, 1, 1, linux.2xlarge)", conclusion="failure", **extra):
    return {"name": name, "conclusion": conclusion, **extra}


def test_it_imports_the_openreg_job_with_per_test_results_linked_upstream(upstream, reference):
    run = upstream.add_workflow_run(
        UPSTREAM,
        SHA,
        jobs=[openreg_job(), {"name": "linux-jammy-py3.10 / test (default, 1, 5)", "conclusion": "success"}],
        artifacts=[
            {
                "name": "test-reports-test-openreg-1-1-linux.2xlarge_{job_id}",
                "data": zipped("openreg-shard1.xml", "openreg-shard2.xml"),
            }
        ],
    )
    result = reference_import(SHA)
    assert (result.jobs, result.with_tests) == (1, 1)
    job = JobRun.objects.get()
    assert (job.project, job.head_sha, job.conclusion, job.ended_by) == (reference, SHA, "failure", "imported")
    assert job.workflow_url.startswith(f"https://github.com/{UPSTREAM}/actions/runs/{run.id}/job/")
    assert (job.tests_passed, job.tests_failed, job.tests_error, job.tests_skipped, job.tests_total) == (5, 2, 1, 1, 9)
    assert job.tests_accelerator_ran == 1  # test_storage_resize: ran (and failed), classified ACCELERATOR
    names = {t.name: t.hw_classification for t in job.failed_tests.all()}
    assert names == {
        "test_noncontiguous_samples_matmul_privateuse1_float16": "GENERIC",
        "test_storage_resize_privateuse1": "ACCELERATOR",
        "test_conv2d_backward_privateuse1_bfloat16": "",
    }


def test_the_download_redirect_is_followed_without_our_token(upstream, reference):
    upstream.add_workflow_run(
        UPSTREAM,
        SHA,
        jobs=[openreg_job()],
        artifacts=[{"name": "test-reports_{job_id}", "data": zipped("openreg-shard2.xml")}],
    )
    reference_import(SHA)
    blob = upstream.requests("GET", r"/_blobs/.*")[0]
    assert "authorization" not in blob.headers


def test_several_matching_jobs_each_get_their_own_reports(upstream, reference):
    upstream.add_workflow_run(
        UPSTREAM,
        SHA,
        jobs=[
            openreg_job("test (openreg, 1, 2, linux.2xlarge)"),
            openreg_job("test (openreg, 2, 2, linux.2xlarge)", "success"),
        ],
        artifacts=[{"name": "test-reports-openreg-2_{job_id}", "data": zipped("openreg-shard2.xml")}],
    )
    result = reference_import(SHA)
    assert (result.jobs, result.with_tests) == (2, 1)
    shard2 = JobRun.objects.get(job_name__contains="2, 2")
    assert shard2.tests_total == 3 and JobRun.objects.get(job_name__contains="1, 2").tests_total is None


def test_the_latest_attempt_of_a_rerun_wins(upstream, reference):
    upstream.add_workflow_run(
        UPSTREAM,
        SHA,
        run_attempt=2,
        jobs=[openreg_job(run_attempt=1), openreg_job(conclusion="success", run_attempt=2)],
    )
    reference_import(SHA)
    job = JobRun.objects.get()
    assert (job.run_attempt, job.conclusion) == (2, "success")


def test_runs_are_read_across_pages(upstream, reference):
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job()])
    for _ in range(101):
        upstream.add_workflow_run(UPSTREAM, SHA, name="lint", jobs=[{"name": "lintrunner", "conclusion": "success"}])
    assert reference_import(SHA).jobs == 1
    assert len(upstream.requests("GET", rf"/repos/{UPSTREAM}/actions/runs")) == 2
    assert len(upstream.requests("GET", rf"/repos/{UPSTREAM}/actions/runs/\d+/jobs")) == 1, (
        "only the pull/trunk workflows are read"
    )


def test_an_expired_artifact_leaves_a_job_level_result_and_says_so(upstream, reference):
    upstream.add_workflow_run(
        UPSTREAM, SHA, jobs=[openreg_job()], artifacts=[{"name": "test-reports_{job_id}", "data": b"", "expired": True}]
    )
    result = reference_import(SHA)
    assert result.with_tests == 0 and "expired" in result.summary
    assert JobRun.objects.get().tests_total is None


def test_malformed_junit_is_skipped_and_named(upstream, reference):
    upstream.add_workflow_run(
        UPSTREAM,
        SHA,
        jobs=[openreg_job()],
        artifacts=[{"name": "test-reports_{job_id}", "data": zipped("malformed.xml", "openreg-shard2.xml")}],
    )
    result = reference_import(SHA)
    assert "malformed.xml" in result.summary
    assert JobRun.objects.get().tests_total == 3


def test_a_github_5xx_is_retried(upstream, reference):
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job()])
    upstream.fail("GET", rf"/repos/{UPSTREAM}/actions/runs", status=502, times=2)
    assert reference_import(SHA).jobs == 1


def test_importing_twice_changes_nothing(upstream, reference):
    upstream.add_workflow_run(
        UPSTREAM,
        SHA,
        jobs=[openreg_job()],
        artifacts=[{"name": "test-reports_{job_id}", "data": zipped("openreg-shard1.xml")}],
    )
    reference_import(SHA)
    reference_import(SHA)
    assert JobRun.objects.count() == 1 and JobRun.objects.get().failed_tests.count() == 2


def test_without_a_reference_project_nothing_is_imported(upstream):
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job()])
    assert "no active reference project" in reference_import(SHA).summary


def test_the_sweep_picks_recent_commits_without_a_finished_reference(reference):
    from relay.models import UpstreamCommit

    UpstreamCommit.objects.create(sha=SHA, is_trunk=True)
    UpstreamCommit.objects.create(sha="cd" * 20, is_trunk=True)
    JobRun.objects.create(
        project=reference,
        delivery_key="cd" * 20,
        run_id="1",
        workflow_name="pull",
        status="completed",
        conclusion="success",
        ended_by="imported",
        head_sha="cd" * 20,
    )
    from django.core.cache import cache

    cache.clear()
    assert shas_to_import(48, 10) == [SHA]
    assert shas_to_import(48, 10) == [], "looked at again only after a pause"


def test_the_command_imports_and_refuses_a_bad_sha(upstream, reference, capsys):
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job()])
    call_command("reference_import", "--sha", SHA)
    assert "1 reference jobs" in capsys.readouterr().out
    with pytest.raises(CommandError):
        call_command("reference_import", "--sha", "nothex")


# --- where PyTorch keeps the results: S3, then GitHub artifacts, then the job's log ------------------


def s3_key(
    run, job_name="test (openreg, 1, 1, linux.2xlarge)", attempt=1, form="test-reports-test-openreg-1-1-linux.2xlarge"
):
    job = next(j for j in run.jobs if j["name"] == job_name)
    return f"{UPSTREAM}/{run.id}/{attempt}/artifact/{form}_{job['id']}.zip"


def test_the_s3_test_reports_are_read_first_by_run_attempt_and_job_id(upstream, reference):
    run = upstream.add_workflow_run(
        UPSTREAM,
        SHA,
        jobs=[openreg_job(log=github_log(unittest_verbose_output()))],
        artifacts=[{"name": "test-reports_{job_id}", "data": zipped("openreg-shard2.xml")}],
    )
    upstream.add_s3_object(s3_key(run), zipped("openreg-shard1.xml", "openreg-shard2.xml"))
    result = reference_import(SHA)
    job = JobRun.objects.get()
    assert (result.with_tests, job.tests_source, job.tests_total, job.tests_failed, job.tests_error) == (
        1,
        "s3",
        9,
        2,
        1,
    )
    (fetch,) = upstream.requests("GET", r"/_s3/.*")
    assert "authorization" not in fetch.headers, "the bucket is read anonymously"
    assert not upstream.requests("GET", r".*/artifacts") and not upstream.requests("GET", r".*/logs")


def test_the_s3_key_without_the_job_word_is_tried_too(upstream, reference):
    run = upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job()])
    upstream.add_s3_object(s3_key(run, form="test-reports-openreg-1-1-linux.2xlarge"), zipped("openreg-shard2.xml"))
    reference_import(SHA)
    assert JobRun.objects.get().tests_source == "s3"


def test_a_rerun_reads_its_own_attempts_s3_reports(upstream, reference):
    run = upstream.add_workflow_run(UPSTREAM, SHA, run_attempt=2, jobs=[openreg_job(run_attempt=2)])
    upstream.add_s3_object(s3_key(run, attempt=1), zipped("openreg-shard1.xml"))
    upstream.add_s3_object(s3_key(run, attempt=2), zipped("openreg-shard2.xml"))
    reference_import(SHA)
    assert JobRun.objects.get().tests_total == 3


def test_without_s3_reports_the_github_artifact_is_used_and_recorded(upstream, reference):
    upstream.s3_deny_missing()  # S3's answer to an anonymous reader for a missing key: 403
    upstream.add_workflow_run(
        UPSTREAM,
        SHA,
        jobs=[openreg_job()],
        artifacts=[{"name": "test-reports_{job_id}", "data": zipped("openreg-shard2.xml")}],
    )
    result = reference_import(SHA)
    job = JobRun.objects.get()
    assert (job.tests_source, job.tests_total) == ("artifact", 3) and "403" not in result.summary


def test_without_any_report_the_unittest_log_gives_the_per_test_results(upstream, reference):
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job(log=github_log(unittest_verbose_output()))])
    result = reference_import(SHA)
    job = JobRun.objects.get()
    assert (result.with_tests, job.tests_source) == (1, "log")
    assert "1 with per-test results [1 via job log]" in result.summary
    counts = (
        job.tests_passed,
        job.tests_failed,
        job.tests_error,
        job.tests_skipped,
        job.tests_xfailed,
        job.tests_xpassed,
    )
    assert (counts, job.tests_total) == ((2, 3, 1, 1, 1, 1), 9)
    assert job.failed_tests.get(name="test_div_openreg_float32").outcome == "error"
    failed = {t.name: t.message for t in job.failed_tests.all()}
    assert failed["test_mul_openreg_float32"] == "AssertionError: 4 != 5 : upstream broke mul"
    assert job.failed_tests.get(name="test_resize").classname == "suite_openreg_ops.TestOpenRegStorage"
    (blob,) = upstream.requests("GET", r"/_blobs/.*")
    assert "authorization" not in blob.headers, "the log's redirect is followed without our token"


def test_a_log_of_a_run_that_never_finished_leaves_a_job_level_result(upstream, reference):
    log = github_log(unittest_verbose_output())
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job(log=log[: log.index("test_printing")])])
    result = reference_import(SHA)
    assert JobRun.objects.get().tests_total is None and "never printed" in result.summary


def test_a_job_without_a_log_keeps_its_job_level_result(upstream, reference):
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job()])
    result = reference_import(SHA)
    job = JobRun.objects.get()
    assert (result.with_tests, job.tests_total, job.tests_source, job.conclusion) == (0, None, "", "failure")


def test_a_running_job_is_not_looked_for_reports(upstream, reference):
    upstream.add_workflow_run(
        UPSTREAM, SHA, status="in_progress", jobs=[openreg_job(status="in_progress", conclusion=None)]
    )
    reference_import(SHA)
    assert not upstream.requests("GET", r"/_s3/.*") and not upstream.requests("GET", r".*/logs")


def test_a_bad_s3_zip_is_named_and_the_next_source_is_used(upstream, reference):
    run = upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job(log=github_log(unittest_verbose_output()))])
    upstream.add_s3_object(s3_key(run), b"PK\x03\x04 not really a zip")
    result = reference_import(SHA)
    assert JobRun.objects.get().tests_source == "log"
    assert "test-reports-test-openreg-1-1-linux.2xlarge" in result.summary and "zip" in result.summary


def test_a_zip_with_too_many_members_is_skipped(upstream, reference, monkeypatch):
    monkeypatch.setattr("relay.reference.reports.MAX_ZIP_MEMBERS", 1)
    run = upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job()])
    upstream.add_s3_object(s3_key(run), zipped("openreg-shard1.xml", "openreg-shard2.xml"))
    result = reference_import(SHA)
    assert JobRun.objects.get().tests_total is None and "2 XML files, more than 1" in result.summary


def test_a_download_over_the_size_limit_is_skipped(upstream, reference, monkeypatch):
    monkeypatch.setattr("relay.reference.reports.MAX_ARTIFACT_BYTES", 100)
    monkeypatch.setattr("relay.reference.reports.MAX_LOG_BYTES", 100)
    run = upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job(log=github_log(unittest_verbose_output()))])
    upstream.add_s3_object(s3_key(run), zipped("openreg-shard1.xml"))
    result = reference_import(SHA)
    assert JobRun.objects.get().tests_total is None
    assert result.summary.count("larger than") == 2, "the S3 zip and the log, each named"


def test_an_s3_server_error_is_noted_and_the_import_goes_on(upstream, reference):
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job(log=github_log(unittest_verbose_output()))])
    upstream.fail("GET", r"/_s3/.*", status=503, times=None)
    result = reference_import(SHA)
    assert JobRun.objects.get().tests_source == "log" and "503" in result.summary


def test_s3_is_not_asked_when_no_bucket_is_configured(upstream, reference, settings):
    settings.CRCR_REFERENCE_ARTIFACT_BASE = ""
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job()])
    reference_import(SHA)
    assert not upstream.requests("GET", r"/_s3/.*")


def test_a_log_of_pytorchs_own_test_runner_gives_its_failures_with_their_files(upstream, reference):
    log = PYTORCH_OPENREG_LOG.read_text()
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job(log=github_log(log))])
    reference_import(SHA)
    job = JobRun.objects.get()
    assert (job.tests_source, job.tests_total, job.tests_failed, job.tests_error, job.tests_skipped) == (
        "log",
        22,
        6,
        2,
        2,
    )
    assert (job.tests_xfailed, job.tests_xpassed) == (2, 2)
    failed = job.failed_tests.get(name="test_binary_op_sub_openreg_float32")
    assert (failed.classname, failed.file) == ("TestDeviceGenericPRIVATEUSE1", "test/test_device_generic.py")


def sandbox_sha(log_only: bool) -> str:
    from devtools.standin.sandbox import commit_fate, reference_log_only

    return next(
        sha
        for sha in (f"{i:040x}" for i in range(1, 500))
        if reference_log_only(sha) == log_only and commit_fate(sha)[0]  # a commit that broke upstream
    )


@pytest.mark.parametrize("log_only, source", [(False, "s3"), (True, "log")])
def test_the_sandboxs_reference_is_imported_from_s3_or_its_log_with_the_same_answer(
    upstream, reference, log_only, source
):
    from devtools.standin.sandbox import reference_junit, reference_run
    from relay.reference.junit import junit_parse

    sha = sandbox_sha(log_only)
    reference_run(upstream, sha)
    reference_import(sha)
    job, expected = JobRun.objects.get(), junit_parse(reference_junit(sha))
    counts = (job.tests_passed, job.tests_failed, job.tests_error, job.tests_skipped, job.tests_xfailed)
    assert (job.tests_source, job.conclusion) == (source, "failure")
    assert counts == (expected.passed, expected.failed, expected.error, expected.skipped, expected.xfailed)
    assert sorted((t.classname, t.name, t.outcome) for t in job.failed_tests.all()) == sorted(
        (t.classname, t.name, t.outcome) for t in expected.failed_tests
    )


@pytest.mark.parametrize(
    "name, first",
    [
        ("test (openreg, 1, 1, linux.2xlarge)", "test-reports-test-openreg-1-1-linux.2xlarge_7.zip"),
        (
            "linux-jammy-py3.10-gcc11 / test (openreg, 2, 3, lf.linux.2xlarge, unstable)",
            "test-reports-test-openreg-2-3-lf.linux.2xlarge_7.zip",
        ),
    ],
)
def test_the_s3_names_follow_pytorchs_upload_step(name, first):
    from relay.reference.reports import s3_names

    assert s3_names({"id": 7, "name": name}) == [first, first.replace("test-reports-test-", "test-reports-")]


def test_a_job_name_without_a_shard_has_no_s3_name():
    from relay.reference.reports import s3_names

    assert s3_names({"id": 7, "name": "openreg-build"}) == []


def test_a_stalled_s3_answer_times_out_and_the_next_source_is_used(upstream, reference, monkeypatch):
    import httpx

    monkeypatch.setattr("relay.reference.reports._TIMEOUT", httpx.Timeout(0.3, connect=0.3))
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job(log=github_log(unittest_verbose_output()))])
    upstream.fail("GET", r"/_s3/.*", status=None, delay=1.0, times=None)
    result = reference_import(SHA)
    assert JobRun.objects.get().tests_source == "log" and "S3 test-reports" in result.summary


def imported_row(reference, sha, **fields):
    defaults = {"delivery_key": sha, "run_id": "1", "workflow_name": "pull", "status": "completed"}
    return JobRun.objects.create(project=reference, ended_by="imported", head_sha=sha, **{**defaults, **fields})


def test_a_job_that_just_finished_without_per_test_results_is_looked_at_again_within_the_grace(reference):
    from datetime import timedelta

    from django.core.cache import cache
    from django.utils import timezone

    from relay.models import UpstreamCommit
    from relay.reference.imports import RESULTS_GRACE

    now = timezone.now()
    fresh, stale, shard, ok = ("1" * 40, "2" * 40, "3" * 40, "4" * 40)
    for sha in (fresh, stale, shard, ok):
        UpstreamCommit.objects.create(sha=sha, is_trunk=True)
    imported_row(reference, fresh, conclusion="success", reported_completed_at=now - timedelta(minutes=1))
    imported_row(reference, stale, conclusion="success", reported_completed_at=now - RESULTS_GRACE * 2)
    imported_row(reference, shard, conclusion="success", tests_total=3, job_name="1")
    imported_row(reference, shard, status="in_progress", job_name="2")
    imported_row(reference, ok, conclusion="success", tests_total=3, reported_completed_at=now - timedelta(minutes=1))
    cache.clear()
    assert sorted(shas_to_import(48, 10)) == sorted([fresh, shard]), (
        "the log may not be served yet, and another shard is still running"
    )


def test_a_later_look_that_finds_nothing_keeps_what_an_earlier_one_found(upstream, reference):
    run = upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job()])
    upstream.add_s3_object(s3_key(run), zipped("openreg-shard1.xml"))
    reference_import(SHA)
    upstream.fail("GET", r"/_s3/.*", status=503, times=None)
    reference_import(SHA)
    job = JobRun.objects.get()
    assert (job.tests_source, job.tests_total, job.failed_tests.count()) == ("s3", 6, 2)


def test_the_upstream_jobs_own_times_are_kept(upstream, reference):
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job()])
    reference_import(SHA)
    job = JobRun.objects.get()
    assert job.reported_started_at is not None and job.reported_completed_at >= job.reported_started_at


def test_a_job_already_stored_with_per_test_results_is_not_downloaded_again(upstream, reference):
    run = upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job()])
    upstream.add_s3_object(s3_key(run), zipped("openreg-shard1.xml"))
    reference_import(SHA)
    upstream.reset()
    assert reference_import(SHA).with_tests == 1
    assert not upstream.requests("GET", r"/_s3/.*") and JobRun.objects.get().tests_total == 6


def test_an_unnamed_artifact_of_a_two_job_run_is_not_given_to_the_job_still_without_results(upstream, reference):
    run = upstream.add_workflow_run(
        UPSTREAM,
        SHA,
        jobs=[openreg_job("test (openreg, 1, 2, linux.2xlarge)"), openreg_job("test (openreg, 2, 2, linux.2xlarge)")],
        artifacts=[{"name": "test-reports-unnamed", "data": zipped("openreg-shard2.xml")}],
    )
    upstream.add_s3_object(
        s3_key(run, "test (openreg, 1, 2, linux.2xlarge)", form="test-reports-test-openreg-1-2-linux.2xlarge"),
        zipped("openreg-shard1.xml"),
    )
    reference_import(SHA)
    reference_import(SHA)
    assert JobRun.objects.get(job_name__contains="2, 2").tests_total is None


def test_the_commit_page_says_the_imported_reference_came_from_its_log(upstream, reference, client):
    from relay.models import UpstreamCommit

    UpstreamCommit.objects.create(sha=SHA, is_trunk=True)
    upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job(log=github_log(unittest_verbose_output()))])
    reference_import(SHA)
    html = client.get(f"/commit/{SHA}").content.decode()
    assert 'read from upstream\'s <span class="tests-source">job log</span>' in html
    assert "2/9" in html and "via job log" in html, "2 of 9 passed, on the reference's job row"


def test_an_xml_file_too_large_unpacked_is_skipped_and_the_rest_read(upstream, reference, monkeypatch):
    monkeypatch.setattr("relay.reference.reports.MAX_MEMBER_BYTES", 1000)
    run = upstream.add_workflow_run(UPSTREAM, SHA, jobs=[openreg_job()])
    upstream.add_s3_object(s3_key(run), zipped("openreg-shard1.xml", "openreg-shard2.xml"))
    assert (JUNIT / "openreg-shard1.xml").stat().st_size > 1000 > (JUNIT / "openreg-shard2.xml").stat().st_size
    result = reference_import(SHA)
    assert JobRun.objects.get().tests_total == 3 and "openreg-shard1.xml: larger than" in result.summary
