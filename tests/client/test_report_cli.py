"""The reporting client run the way downstream CI runs it: a subprocess with plain Python (no site
packages), talking to a live relay whose OIDC issuers are the local GitHub stand-in. What counts
is what the relay stored, and the exit code the CI step sees."""

import ast
import base64
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import pytest
import yaml
from django.utils import timezone

from relay.dispatch.sending import dispatch_client_payload
from relay.models import Dispatch, JobRun
from tests.client import CLIENT, JUNIT, huge_junit_write
from tests.conftest import action_body
from tests.factories import DispatchFactory, JobRunFactory, ProjectFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

REPO, REPO_ID = "intel/torch-xpu-ops", 123456
ARTIFACTS = "https://ci.intel.example/torch-xpu-ops/4242/artifacts"
NIGHTLY_SHA = "5d6e4b3c2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d"
ACTION = Path(__file__).resolve().parents[2] / ".github" / "actions" / "report" / "action.yml"
PLAIN_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def run_client(env: dict, *args: str, cwd=None, timeout: float = 90) -> subprocess.CompletedProcess:
    """`python3 crcr_report.py ...` with the standard library only (-S: no site-packages)."""
    command = [sys.executable, "-I", "-S", str(CLIENT), *args]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def jwt_claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def reports(directory: Path, *names: str) -> Path:
    """Copy fixture reports to `directory`/reports, where a test job would have written them."""
    (directory / "reports").mkdir(exist_ok=True)
    for name in names:
        shutil.copy(JUNIT / name, directory / "reports" / name)
    return directory


@pytest.fixture
def dispatch(db):
    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")
    return DispatchFactory(project=project, state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(seconds=90))


@pytest.fixture
def github_job(tmp_path, live_server, standin, oidc, dispatch) -> dict:
    """The environment of the GitHub Actions job that the relay's dispatch started."""
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "pull_request", "client_payload": dispatch_client_payload(dispatch)}))
    request_url, request_token = standin.actions_request_token(repository=REPO, repository_id=str(REPO_ID))
    return {
        **PLAIN_ENV,
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "repository_dispatch",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_WORKFLOW": "xpu-ci",
        "GITHUB_RUN_ID": "4242",
        "GITHUB_RUN_ATTEMPT": "1",
        "GITHUB_JOB": "test",
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_SERVER_URL": "https://github.com",
        "ACTIONS_ID_TOKEN_REQUEST_URL": request_url,
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN": request_token,
        "CRCR_CALLBACK_URL": f"{live_server.url}/github/callback",
    }


# --- a job's life ----------------------------------------------------------------------------------


def test_a_job_that_reports_its_start_and_end_shows_up_with_its_failed_tests(github_job, tmp_path):
    started = run_client(github_job, "in-progress", "--env", "device=xpu")
    assert started.returncode == 0, started.stderr
    job = JobRun.objects.get()
    assert job.status == "in_progress" and 85 <= job.queue_seconds <= 150

    reports(tmp_path, "pytest_failing.xml", "pytest_passing.xml")
    done = run_client(
        github_job,
        "completed",
        "--conclusion",
        "failure",
        "--junit",
        "reports/*.xml",
        "--artifact-url",
        ARTIFACTS,
        "--env",
        "device=xpu",
        "--env",
        "driver=1.6.32224",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "6 passed, 2 failed, 1 skipped, 1 error, 1 xfailed, 3 failed tests listed" in done.stdout
    job.refresh_from_db()
    assert (job.status, job.conclusion, job.run_id, job.run_attempt, job.job_name) == (
        "completed",
        "failure",
        "4242",
        1,
        "test",
    )
    assert (job.tests_passed, job.tests_failed, job.tests_skipped, job.tests_total) == (6, 2, 1, 11)
    assert (job.tests_error, job.tests_xfailed, job.tests_xpassed) == (1, 1, 0)
    assert [(t.name, t.hw_classification) for t in job.failed_tests.all()] == [
        ("test_batchnorm_eval_xpu_float16", "HW"),
        ("test_embedding_bag_xpu_int64", ""),
        ("test_lstm_xpu_float64", ""),
    ]
    assert job.failed_tests.first().message.startswith("AssertionError: Tensor-likes are not close!")
    assert job.environment == {"device": "xpu", "driver": "1.6.32224"}
    assert (
        job.artifact_url == ARTIFACTS and job.workflow_url == "https://github.com/intel/torch-xpu-ops/actions/runs/4242"
    )
    assert job.execution_seconds is not None


COLLECTION_ERROR = (
    Path(__file__).resolve().parents[1] / "fixtures" / "pytorch-reports" / "openreg" / "pytest-collection-error.xml"
)
"""Real pytest output for a test module that fails to import (the backend's extension no longer loads)."""


@pytest.mark.parametrize(
    "reference_conclusion, summary",
    [
        ("success", "1/2 backends passed, 1 failing (backend-specific)"),
        # no base result shows the reference failing before: the PR broke it (issue 50 item 2)
        (
            "failure",
            "0/2 backends passed, 2 failing (1 the reference, 1 shared with the reference, which this PR broke)",
        ),
    ],
)
def test_a_collection_error_reported_by_the_client_is_the_jobs_own_failure_on_the_pr_page(
    github_job, tmp_path, dispatch, client, reference_conclusion, summary
):
    reference = ProjectFactory(full_name="pytorch/openreg-ci", is_reference=True, level="L2")
    JobRunFactory(
        project=reference,
        head_sha=dispatch.head_sha,
        pr_number=2,
        event_type="pull_request",
        conclusion=reference_conclusion,
        tests_total=40 if reference_conclusion == "success" else 1,
        tests_error=0 if reference_conclusion == "success" else 1,
    )
    (tmp_path / "reports").mkdir()
    shutil.copy(COLLECTION_ERROR, tmp_path / "reports" / "junit.xml")
    done = run_client(github_job, "completed", "--conclusion", "failure", "--junit", "reports/*.xml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = JobRun.objects.get(project=dispatch.project)
    assert (job.tests_total, job.tests_error, job.failed_tests.count()) == (1, 1, 0)
    page = client.get("/pr/2")
    assert page.status_code == 200 and client.get("/api/v1/prs/2").status_code == 200
    assert summary in page.content.decode(), re.findall(r"[0-9]/2 backends passed[^<]*", page.content.decode())


def test_a_passing_job_reports_success_with_no_failed_tests(github_job, tmp_path):
    reports(tmp_path, "pytest_passing.xml")
    done = run_client(github_job, "completed", "--conclusion", "success", "--junit", "reports/*.xml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = JobRun.objects.get()
    assert (job.conclusion, job.tests_passed, job.tests_failed, job.tests_total) == ("success", 4, 0, 4)
    assert not job.failed_tests.exists()


TRIAGE_VERDICT = {
    "schema_version": 1,
    "category": "backend",
    "confidence": "medium",
    "summary": "the XPU kernel for addmm regressed",
    "evidence": [{"test": "TestOps.test_add", "log_url": "https://github.com/intel/torch-xpu-ops/actions/runs/4242"}],
    "analyzer": {"name": "xpu-triage", "version": "3"},
}


def test_a_job_sends_its_failed_tests_and_triage_verdict_from_files(github_job, tmp_path):
    (tmp_path / "failed.json").write_text(json.dumps([{"name": "test_conv", "classname": "TestNN", "duration": 2}]))
    (tmp_path / "verdict.json").write_text(json.dumps(TRIAGE_VERDICT))
    done = run_client(
        github_job,
        "completed",
        "--conclusion",
        "failure",
        "--failed-tests-detail",
        "failed.json",
        "--triage-verdict",
        "verdict.json",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    job = JobRun.objects.get()
    assert [t.name for t in job.failed_tests.all()] == ["test_conv"]
    assert job.triage_verdict["summary"] == "the XPU kernel for addmm regressed"


@pytest.mark.parametrize("verdict", ["{not json", "[1, 2]", json.dumps({**TRIAGE_VERDICT, "summary": "x" * 17000})])
def test_a_triage_verdict_that_cannot_be_sent_is_left_out_and_the_report_still_goes(github_job, verdict):
    done = run_client(github_job, "completed", "--conclusion", "failure", "--triage-verdict", verdict)
    assert done.returncode == 0, done.stderr
    assert "left out of the report" in done.stderr
    assert JobRun.objects.get().triage_verdict is None


def test_junit_and_failed_tests_detail_together_are_a_usage_error(github_job):
    done = run_client(
        github_job, "completed", "--conclusion", "failure", "--junit", "x.xml", "--failed-tests-detail", "[]"
    )
    assert done.returncode == 2 and "not both" in done.stderr


def test_a_malformed_failed_tests_detail_exits_3_and_sends_nothing(github_job):
    done = run_client(
        github_job, "completed", "--conclusion", "failure", "--failed-tests-detail", '[{"classname": "A"}]'
    )
    assert done.returncode == 3 and "needs a non-empty 'name'" in done.stderr
    assert not JobRun.objects.exists()


def test_it_sends_the_same_request_shape_as_the_existing_action(github_job, dispatch):
    printed = run_client(github_job, "completed", "--conclusion", "success", "--dry-run")
    body = json.loads(printed.stdout)
    # The token inside carries a signing time: compare with the payload the job received.
    sent = json.loads(Path(github_job["GITHUB_EVENT_PATH"]).read_text())["client_payload"]
    expected = action_body(sent, "completed", "success", run_id="4242", job="test")
    assert list(body) == list(expected) and body["callback_token"] == expected["callback_token"]
    assert list(body["workflow"]) == list(expected["workflow"])
    assert {k: v for k, v in body["workflow"].items() if k != "completed_at"} == {
        k: v for k, v in expected["workflow"].items() if k != "completed_at"
    }


def test_a_huge_report_is_capped_to_what_the_relay_keeps(github_job, tmp_path):
    huge_junit_write(
        tmp_path / "reports" / "huge.xml", failures=1200, message_bytes=3000, stack_bytes=10_000, passes=20
    )
    done = run_client(github_job, "completed", "--conclusion", "failure", "--junit", "reports/**/*.xml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    job = JobRun.objects.get()
    assert (job.tests_failed, job.tests_passed) == (1200, 20)
    assert job.failed_tests.count() == 1000
    assert all(
        len(test.message.encode()) <= 1024 and len(test.stacktrace.encode()) <= 4096 for test in job.failed_tests.all()
    )


def test_a_nightly_run_reports_itself_without_a_dispatch(github_job, standin):
    standin.add_repo("pytorch/pytorch", repo_id=65600975, installation_id=77)
    standin.add_commit("pytorch/pytorch", NIGHTLY_SHA)
    schedule = {key: value for key, value in github_job.items() if key != "GITHUB_EVENT_PATH"}
    done = run_client(
        {**schedule, "GITHUB_EVENT_NAME": "schedule"},
        "completed",
        "--event-type",
        "nightly",
        "--delivery-id",
        NIGHTLY_SHA,
        "--conclusion",
        "success",
        "--test-results",
        '{"passed": 1200, "failed": 0, "skipped": 31}',
    )
    assert done.returncode == 0, done.stderr
    job = JobRun.objects.get()
    assert (job.event_type, job.delivery_key, job.head_sha, job.tests_total) == (
        "nightly",
        NIGHTLY_SHA,
        NIGHTLY_SHA,
        1231,
    )


# --- what the step's exit code says --------------------------------------------------------------


def test_a_malformed_report_exits_3_naming_the_file_and_sends_nothing(github_job, tmp_path):
    reports(tmp_path, "pytest_passing.xml", "truncated.xml")
    done = run_client(github_job, "completed", "--conclusion", "failure", "--junit", "reports/*.xml", cwd=tmp_path)
    assert done.returncode == 3
    assert "reports/truncated.xml is not well-formed JUnit XML" in done.stderr
    assert not JobRun.objects.exists()


def test_a_report_that_contradicts_the_relays_record_exits_5_with_the_relays_reason(github_job):
    assert run_client(github_job, "completed", "--conclusion", "success").returncode == 0
    late = run_client(github_job, "in-progress")
    assert late.returncode == 5
    assert late.stderr.startswith("::error::") and "HTTP 409" in late.stderr and "already completed" in late.stderr


def test_a_repository_the_relay_does_not_know_is_ignored_and_the_step_stays_green(github_job, standin):
    request_url, request_token = standin.actions_request_token(repository="someone/else", repository_id="1")
    env = {**github_job, "ACTIONS_ID_TOKEN_REQUEST_URL": request_url, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": request_token}
    done = run_client(env, "in-progress")
    assert done.returncode == 0, done.stderr
    assert "ignored" in done.stdout
    assert not JobRun.objects.exists()


def test_a_refused_token_request_exits_4_and_prints_no_token(github_job):
    env = {**github_job, "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "not-this-runners-request-token"}
    done = run_client(env, "in-progress")
    assert done.returncode == 4
    assert "HTTP 401" in done.stderr and "id-token: write" in done.stderr
    assert "not-this-runners-request-token" not in done.stdout + done.stderr
    assert not JobRun.objects.exists()


def test_a_job_without_id_token_permission_exits_4_and_says_how_to_fix_it(github_job):
    env = {key: value for key, value in github_job.items() if not key.startswith("ACTIONS_ID_TOKEN")}
    done = run_client(env, "in-progress")
    assert done.returncode == 4
    assert "permissions: id-token: write" in done.stderr


def test_a_run_the_relay_did_not_dispatch_exits_3(github_job, tmp_path):
    push = tmp_path / "push.json"
    push.write_text(json.dumps({"ref": "refs/heads/main", "after": NIGHTLY_SHA}))
    done = run_client({**github_job, "GITHUB_EVENT_PATH": str(push), "GITHUB_EVENT_NAME": "push"}, "in-progress")
    assert done.returncode == 3
    assert "holds no client_payload" in done.stderr and "event: push" in done.stderr


def test_completed_without_a_conclusion_is_a_usage_error(github_job):
    done = run_client(github_job, "completed")
    assert done.returncode == 2
    assert "--conclusion ${{ job.status }}" in done.stderr
    assert not JobRun.objects.exists()


def test_a_self_report_needs_both_its_event_type_and_the_sha_it_tested(github_job):
    done = run_client(github_job, "completed", "--conclusion", "success", "--event-type", "nightly")
    assert done.returncode == 2
    assert "--event-type and --delivery-id go together" in done.stderr


# --- Buildkite ---------------------------------------------------------------------------------


def buildkite_project(oidc):
    """A Buildkite-run backend registered by its organization and pipeline UUIDs."""
    claims = oidc.claims(
        "buildkite", "pytorch-cross-repo-ci-relay", 300, organization_slug="vllm-project", pipeline_slug="ci-xpu"
    )
    pipeline = f"{claims['organization_id']}/{claims['pipeline_id']}"
    project = ProjectFactory(
        full_name="vllm-project/vllm-xpu-ci", github_repo_id=None, ci_provider="buildkite", buildkite_pipeline=pipeline
    )
    return DispatchFactory(project=project, state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(seconds=30))


def buildkite_env(live_server, dispatch) -> dict:
    return {
        **PLAIN_ENV,
        "BUILDKITE": "true",
        "BUILDKITE_PIPELINE_SLUG": "ci-xpu",
        "BUILDKITE_BUILD_NUMBER": "1187",
        "BUILDKITE_BUILD_URL": "https://buildkite.com/vllm-project/ci-xpu/builds/1187",
        "BUILDKITE_JOB_ID": "0193a8a2-6f49-4d0c-9d1e-7c54a1f0b2c3",
        "BUILDKITE_LABEL": ":pytorch: XPU tests",
        "BUILDKITE_RETRY_COUNT": "1",
        "CRCR_CLIENT_PAYLOAD": json.dumps(dispatch_client_payload(dispatch)),
        "CRCR_CALLBACK_URL": f"{live_server.url}/github/callback",
    }


def test_a_buildkite_job_reports_with_the_token_its_step_provides(live_server, oidc, tmp_path):
    dispatch = buildkite_project(oidc)
    env = buildkite_env(live_server, dispatch)
    mint = lambda: oidc.mint(kind="buildkite", organization_slug="vllm-project", pipeline_slug="ci-xpu")  # noqa: E731
    assert run_client({**env, "CRCR_OIDC_TOKEN": mint()}, "in-progress").returncode == 0
    reports(tmp_path, "unittest_nested.xml")
    done = run_client(
        {**env, "BK_OIDC": mint(), "BUILDKITE_COMMAND_EXIT_STATUS": "1"},
        "completed",
        "--token-env",
        "BK_OIDC",
        "--junit",
        "reports/*.xml",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    job = JobRun.objects.get()
    assert (job.status, job.conclusion, job.run_id, job.run_attempt) == ("completed", "failure", "1187", 2)
    assert (job.job_name, job.check_run_id) == (":pytorch: XPU tests", "0193a8a2-6f49-4d0c-9d1e-7c54a1f0b2c3")
    assert (
        job.workflow_url == "https://buildkite.com/vllm-project/ci-xpu/builds/1187#0193a8a2-6f49-4d0c-9d1e-7c54a1f0b2c3"
    )
    assert [test.name for test in job.failed_tests.all()] == ["test_storage_xpu", "test_deterministic_index_put_xpu"]


def test_a_buildkite_job_without_a_token_mints_one_per_call_with_the_agent(live_server, standin, oidc, tmp_path):
    dispatch = buildkite_project(oidc)
    calls = tmp_path / "agent-calls.jsonl"
    agent = tmp_path / "bin" / "buildkite-agent"
    agent.parent.mkdir()
    agent.write_text(f"""#!{sys.executable}
# Stands in for `buildkite-agent oidc request-token`: logs its arguments, mints from the stand-in.
import json, sys, urllib.request
open({str(calls)!r}, "a").write(json.dumps(sys.argv[1:]) + "\\n")
audience = sys.argv[sys.argv.index("--audience") + 1]
claims = {{"organization_slug": "vllm-project", "pipeline_slug": "ci-xpu"}}
body = json.dumps({{"kind": "buildkite", "audience": audience, "claims": claims}}).encode()
request = urllib.request.Request({standin.url!r} + "/_standin/oidc/token", data=body, headers={{"Content-Type": "application/json"}})
print(json.load(urllib.request.urlopen(request))["value"])
""")
    agent.chmod(0o755)
    env = {**buildkite_env(live_server, dispatch), "PATH": f"{agent.parent}{os.pathsep}{PLAIN_ENV['PATH']}"}
    assert run_client(env, "in-progress").returncode == 0
    done = run_client(env, "completed", "--conclusion", "success")
    assert done.returncode == 0, done.stderr
    assert JobRun.objects.get().status == "completed"
    logged = [json.loads(line) for line in calls.read_text().splitlines()]
    assert (
        logged
        == [
            [
                "oidc",
                "request-token",
                "--audience",
                "pytorch-cross-repo-ci-relay",
                "--lifetime",
                "300",
                "--claim",
                "organization_id,pipeline_id",
            ]
        ]
        * 2
    )


# --- GitLab --------------------------------------------------------------------------------------


@pytest.fixture
def gitlab_job(live_server, oidc) -> dict:
    project = ProjectFactory(
        full_name="gitlab-org/torch-npu-ci", github_repo_id=None, ci_provider="gitlab", gitlab_project_id="4002"
    )
    dispatch = DispatchFactory(
        project=project, state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(seconds=30)
    )
    return {
        **PLAIN_ENV,
        "GITLAB_CI": "true",
        "CI_PROJECT_PATH": "gitlab-org/torch-npu-ci",
        "CI_PIPELINE_ID": "918273",
        "CI_JOB_ID": "5550001",
        "CI_JOB_NAME": "npu-tests",
        "CI_JOB_URL": "https://gitlab.com/gitlab-org/torch-npu-ci/-/jobs/5550001",
        "CRCR_CLIENT_PAYLOAD": json.dumps(dispatch_client_payload(dispatch)),
        "CRCR_CALLBACK_URL": f"{live_server.url}/github/callback",
    }


def gitlab_tokens(oidc) -> dict:
    """The job's two `id_tokens`: one for each call, as the relay takes every token once."""
    return {
        name: oidc.mint(kind="gitlab", project_path="gitlab-org/torch-npu-ci")
        for name in ("CRCR_TOKEN_START", "CRCR_TOKEN_END")
    }


def test_a_gitlab_job_reports_with_one_id_token_per_call_and_its_status_as_conclusion(gitlab_job, oidc):
    env = {**gitlab_job, **gitlab_tokens(oidc)}
    assert run_client(env, "in-progress", "--token-env", "CRCR_TOKEN_START").returncode == 0
    done = run_client({**env, "CI_JOB_STATUS": "failed"}, "completed", "--token-env", "CRCR_TOKEN_END")
    assert done.returncode == 0, done.stderr
    job = JobRun.objects.get()
    assert (job.status, job.conclusion, job.run_id, job.job_name, job.check_run_id) == (
        "completed",
        "failure",
        "5550001",
        "npu-tests",
        "5550001",
    )


def test_a_retried_gitlab_job_is_recorded_as_a_new_run_not_a_contradiction(gitlab_job, oidc):
    first = {**gitlab_job, **gitlab_tokens(oidc), "CI_JOB_STATUS": "failed"}
    assert run_client(first, "completed", "--token-env", "CRCR_TOKEN_END").returncode == 0
    retry = {**gitlab_job, **gitlab_tokens(oidc), "CI_JOB_ID": "5550002"}
    assert run_client(retry, "in-progress", "--token-env", "CRCR_TOKEN_START").returncode == 0
    assert sorted(JobRun.objects.values_list("run_id", "status")) == [
        ("5550001", "completed"),
        ("5550002", "in_progress"),
    ]


def test_a_provided_token_used_for_a_second_call_is_refused_with_exit_5(gitlab_job, oidc):
    env = {**gitlab_job, "CRCR_OIDC_TOKEN": oidc.mint(kind="gitlab", project_path="gitlab-org/torch-npu-ci")}
    assert run_client(env, "in-progress").returncode == 0
    done = run_client(env, "completed", "--conclusion", "success")
    assert done.returncode == 5
    assert "HTTP 401" in done.stderr and "already used" in done.stderr


# --- retries -------------------------------------------------------------------------------------


class FlakyRelay:
    """A load balancer in front of the relay: it answers the first requests from a script (an
    HTTP status with headers, or "slow": pass on but answer too late) and passes the rest on."""

    def __init__(self, relay_url: str, script=()):
        self.relay_url, self.script, self.tokens = relay_url, list(script), []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _FlakyHandler)
        self.server.flaky = self
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/github/callback"

    def next_step(self, authorization: str):
        with self.lock:
            self.tokens.append(authorization.split(" ", 1)[1])
            return self.script.pop(0) if self.script else None

    def forward(self, body: bytes, authorization: str):
        request = Request(
            self.relay_url, data=body, headers={"Content-Type": "application/json", "Authorization": authorization}
        )
        try:
            with urlopen(request, timeout=30) as response:
                return response.status, response.read()
        except HTTPError as exc:
            return exc.code, exc.read()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _FlakyHandler(BaseHTTPRequestHandler):
    def do_POST(self):
        flaky = self.server.flaky
        body = self.rfile.read(int(self.headers["Content-Length"]))
        step = flaky.next_step(self.headers["Authorization"])
        if isinstance(step, tuple):
            status, headers, answer = step[0], step[1], b'{"detail": "scripted"}'
        else:
            status, answer = flaky.forward(body, self.headers["Authorization"])
            headers = {}
            if step == "slow":
                time.sleep(2.5)  # past the client's --request-timeout: its answer is lost
        try:
            self.send_response(status)
            for name, value in {"Content-Type": "application/json", **headers}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(answer)
        except OSError:
            pass  # the client gave up on this request

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky_relay(live_server):
    relays = []

    def make(*script):
        relays.append(FlakyRelay(f"{live_server.url}/github/callback", script))
        return relays[-1]

    yield make
    for relay in relays:
        relay.close()


def test_a_503_with_retry_after_is_retried_with_a_fresh_token_and_recorded_once(github_job, flaky_relay):
    relay = flaky_relay((503, {"Retry-After": "0"}))
    done = run_client({**github_job, "CRCR_CALLBACK_URL": relay.url}, "in-progress")
    assert done.returncode == 0, done.stderr
    assert "HTTP 503" in done.stderr and "trying again" in done.stderr
    assert len(relay.tokens) == 2 and jwt_claims(relay.tokens[0])["jti"] != jwt_claims(relay.tokens[1])["jti"]
    assert JobRun.objects.get().status == "in_progress"


def test_a_429_with_retry_after_waits_as_long_as_asked_then_retries(github_job, flaky_relay):
    relay = flaky_relay((429, {"Retry-After": "1"}))
    began = time.monotonic()
    done = run_client({**github_job, "CRCR_CALLBACK_URL": relay.url}, "in-progress")
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - began >= 1 and len(relay.tokens) == 2


def test_a_503_without_retry_after_is_not_retried_and_exits_6(github_job, flaky_relay):
    relay = flaky_relay((503, {}))
    done = run_client({**github_job, "CRCR_CALLBACK_URL": relay.url}, "in-progress")
    assert done.returncode == 6
    assert len(relay.tokens) == 1 and not JobRun.objects.exists()


def test_a_retry_after_beyond_max_time_gives_up_at_once(github_job, flaky_relay):
    relay = flaky_relay((429, {"Retry-After": "120"}))
    began = time.monotonic()
    done = run_client({**github_job, "CRCR_CALLBACK_URL": relay.url}, "in-progress", "--max-time", "5")
    assert done.returncode == 6 and "--max-time ran out" in done.stderr
    assert time.monotonic() - began < 4 and len(relay.tokens) == 1


def test_a_lost_answer_is_retried_and_the_relay_calls_the_repeat_a_duplicate(github_job, flaky_relay):
    relay = flaky_relay("slow")
    done = run_client({**github_job, "CRCR_CALLBACK_URL": relay.url}, "in-progress", "--request-timeout", "1")
    assert done.returncode == 0, done.stderr
    assert "duplicate" in done.stdout and len(relay.tokens) == 2
    assert JobRun.objects.count() == 1


def test_an_unreachable_relay_is_retried_until_max_time_then_exits_6(github_job):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    began = time.monotonic()
    done = run_client(
        {**github_job, "CRCR_CALLBACK_URL": f"http://127.0.0.1:{closed_port}/github/callback"},
        "in-progress",
        "--max-time",
        "3",
    )
    assert done.returncode == 6
    assert "no answer from" in done.stderr and "--max-time ran out" in done.stderr
    assert time.monotonic() - began < 10


# --- the composite action ----------------------------------------------------------------------


def action_run(env: dict, cwd: Path, **inputs: str) -> subprocess.CompletedProcess:
    """The action's one step as the runner runs it: bash, with the inputs in its environment."""
    script = yaml.safe_load(ACTION.read_text())["runs"]["steps"][0]["run"]
    step_env = {
        f"CRCR_IN_{name.upper()}": inputs.get(name, "")
        for name in (
            "status",
            "conclusion",
            "junit",
            "artifact_url",
            "environment",
            "job_name",
            "event_type",
            "delivery_id",
            "test_results",
            "failed_tests_detail",
            "triage_verdict",
            "callback_url",
            "audience",
            "max_time",
            "check_run_id",
        )
    }
    return subprocess.run(
        ["bash", "-c", script],
        env={**env, **step_env, "CRCR_CLIENT": str(CLIENT)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
    )


def test_the_composite_action_reports_a_matrix_leg_start_and_end(github_job, tmp_path):
    leg = {
        "job_name": "test (xpu, 1/2)",
        "check_run_id": "31337",
        "environment": "device=xpu\n  sdk=2025.2  \n",
        "max_time": "60",
    }
    started = action_run(github_job, tmp_path, status="in_progress", **leg)
    assert started.returncode == 0, started.stderr
    reports(tmp_path, "pytest_failing.xml", "pytest_passing.xml")
    done = action_run(
        github_job,
        tmp_path,
        status="completed",
        conclusion="failure",
        artifact_url=ARTIFACTS,
        junit="reports/pytest_failing.xml\n reports/pytest_passing.xml\n",
        **leg,
    )
    assert done.returncode == 0, done.stderr
    job = JobRun.objects.get()
    assert (job.job_name, job.check_run_id, job.status, job.conclusion) == (
        "test (xpu, 1/2)",
        "31337",
        "completed",
        "failure",
    )
    assert (job.tests_total, job.failed_tests.count(), job.environment) == (11, 3, {"device": "xpu", "sdk": "2025.2"})


def test_the_composite_action_sends_failed_tests_detail_and_a_triage_verdict(github_job, tmp_path):
    detail = [
        {"name": "test_add", "classname": "TestOps", "message": "m" * 2000, "stacktrace": "s", "duration": 1.5},
        {"name": "test_mul"},
    ]
    done = action_run(
        github_job,
        tmp_path,
        status="completed",
        conclusion="failure",
        test_results='{"passed": 8, "failed": 2}',
        failed_tests_detail=json.dumps(detail),
        triage_verdict=json.dumps(TRIAGE_VERDICT),
    )
    assert done.returncode == 0, done.stderr
    job = JobRun.objects.get()
    assert [(t.classname, t.name) for t in job.failed_tests.all()] == [("TestOps", "test_add"), ("", "test_mul")]
    assert len(job.failed_tests.first().message.encode()) <= 1024 and (job.tests_failed, job.tests_total) == (2, 10)
    assert job.conclusion == "failure" and job.triage_verdict["category"] == "backend"


def test_the_composite_action_refuses_an_unknown_status(github_job, tmp_path):
    done = action_run(github_job, tmp_path, status="started")
    assert done.returncode == 2 and "status must be in_progress or completed" in done.stdout


# --- the script itself ---------------------------------------------------------------------------


def test_the_help_documents_every_exit_code():
    shown = run_client(dict(PLAIN_ENV), "completed", "--help").stdout
    for code in range(7):
        assert f"\n  {code}  " in shown


def test_the_client_is_python_3_8_syntax_and_imports_only_the_standard_library():
    tree = ast.parse(CLIENT.read_text(), feature_version=(3, 8))
    imported = {
        alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
    }
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= sys.stdlib_module_names


def test_the_client_reads_numbers_from_ascii_digits_only():
    """`²` passes str.isdigit() and fails int(): a retry count or Retry-After like it is unreadable,
    not a crash on the runner."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("crcr_report_digits", CLIENT)
    client = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = client  # its dataclasses look their module up
    try:
        spec.loader.exec_module(client)
        assert client.retry_after_seconds("²") is None and client.retry_after_seconds("30") == 30.0
        assert client._buildkite_facts({"BUILDKITE_RETRY_COUNT": "²"})["run_attempt"] is None
        assert client._buildkite_facts({"BUILDKITE_RETRY_COUNT": "1"})["run_attempt"] == "2"
    finally:
        del sys.modules[spec.name]


def test_without_a_relay_url_nothing_is_sent_and_the_job_is_told_how_to_set_it(github_job, tmp_path):
    env = {k: v for k, v in github_job.items() if k != "CRCR_CALLBACK_URL"}
    done = run_client(env, "in-progress")
    assert done.returncode == 2
    assert "set CRCR_CALLBACK_URL (or pass --url)" in done.stderr and "OIDC token" in done.stderr
    assert not JobRun.objects.exists()


def test_it_sends_counts_per_test_module_read_from_junit(github_job):
    printed = run_client(
        github_job, "completed", "--conclusion", "failure", "--junit", str(JUNIT / "unittest_nested.xml"), "--dry-run"
    )
    workflow = json.loads(printed.stdout)["workflow"]
    assert workflow["module_counts"] == {"test_torch": {"passed": 2, "failed": 1, "error": 1, "skipped": 1}}
    assert sum(workflow["module_counts"]["test_torch"].values()) == workflow["test_results"]["total"]
