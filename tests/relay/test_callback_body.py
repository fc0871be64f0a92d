"""The body matrix: every malformed callback is a 400 naming what is wrong, and nothing is stored."""

import copy
import json

import pytest
from django.utils import timezone

from relay.dispatch.sending import dispatch_client_payload
from relay.models import FailedTest, JobRun
from tests.conftest import action_body
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db
REPO, REPO_ID = "intel/torch-xpu-ops", 123456


@pytest.fixture
def base(db):
    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")
    return action_body(
        dispatch_client_payload(DispatchFactory(project=project, state="sent", sent_at=timezone.now())),
        "completed",
        "failure",
    )


@pytest.fixture
def post(client, oidc):
    def send(body):
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
        return client.post(
            "/github/callback", data=data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )

    return send


def mutate(body, path, value):
    body = copy.deepcopy(body)
    target = body
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        target.pop(path[-1], None)
    else:
        target[path[-1]] = value
    return body


@pytest.mark.parametrize(
    "path, value, needle",
    [
        (("delivery_id",), KeyError, "delivery_id"),
        (("delivery_id",), 12, "delivery_id"),
        (("workflow",), KeyError, "workflow"),
        (("workflow",), "not an object", "workflow"),
        (("workflow", "status"), KeyError, "status"),
        (("workflow", "status"), "queued", "unknown callback status"),
        (("workflow", "name"), KeyError, "workflow.name"),
        (("workflow", "name"), ["x"], "workflow.name"),
        (("workflow", "run_id"), KeyError, "run_id"),
        (("workflow", "run_id"), {"id": 1}, "run_id"),
        (("workflow", "run_id"), "0", "reserved"),
        (("workflow", "run_id"), "-", "reserved"),  # the sweeper's "never started" row
        (("workflow", "run_attempt"), "first", "run_attempt"),
        (("workflow", "run_attempt"), -1, "run_attempt"),
        (("workflow", "conclusion"), None, "conclusion"),
        (("workflow", "conclusion"), "exploded", "not a GitHub check conclusion"),
        (("workflow", "url"), "javascript:alert(1)", "http or https"),
        (("workflow", "artifact_url"), "file:///etc/passwd", "http or https"),
        (("workflow", "artifact_url"), "https://", "http or https"),
        (("workflow", "started_at"), "yesterday", "ISO-8601"),
        (("workflow", "test_results"), {"passed": "ten"}, "non-negative integer"),
        (("workflow", "test_results"), {"failed": -3}, "non-negative integer"),
        (("workflow", "test_results"), [1, 2], "object of counts"),
        (("workflow", "test_results"), {"xpassed": 1.5}, "non-negative integer"),
        (("workflow", "failed_tests"), [{"name": "t", "outcome": "flaky"}], "one of failed, error, xpassed"),
        (("workflow", "failed_tests"), "test_a", "must be a list"),
        (("workflow", "failed_tests"), [{"classname": "T"}], "needs a 'name'"),
        (("workflow", "failed_tests"), [{"name": "t", "message": 5}], "must be a string"),
        (("workflow", "environment"), ["xpu"], "environment"),
        (("workflow", "environment"), {"device": {"nested": True}}, "must be a string"),
        (("payload",), "string", "payload"),
        (("pytorch_head_sha",), 1234567, "'pytorch_head_sha' must be a string"),
        (("pytorch_head_sha",), "f" * 65, "'pytorch_head_sha' is longer than 64"),
    ],
)
def test_a_malformed_body_is_refused_with_400(post, base, path, value, needle):
    response = post(mutate(base, path, value))
    assert response.status_code == 400, response.content
    assert needle.lower() in response.json()["detail"].lower()
    assert not JobRun.objects.exists()


def test_invalid_json_is_refused_with_400(post):
    response = post(b"{nope")
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["detail"]


def test_a_json_array_is_refused_with_400(post):
    assert post(b"[]").status_code == 400


def test_unicode_and_sql_looking_strings_are_stored_as_data(post, base):
    hostile = "Robert'); DROP TABLE relay_jobrun;-- 测试 🔥 <script>alert(1)</script>"
    body = mutate(base, ("workflow", "job_name"), hostile)
    body["workflow"]["failed_tests"] = [{"name": hostile, "message": "ünïcödé ✓", "classname": "Test'; --"}]
    assert post(body).status_code == 200
    job = JobRun.objects.get()
    assert job.job_name == hostile
    assert FailedTest.objects.get().name == hostile


def test_an_empty_job_name_is_allowed_like_the_existing_relay(post, base):
    assert post(mutate(base, ("workflow", "job_name"), None)).status_code == 200
    assert JobRun.objects.get().job_name == ""


def test_test_results_may_arrive_as_json_text_from_the_action_input(post, base):
    assert post(mutate(base, ("workflow", "test_results"), '{"passed": 5, "failed": 1}')).status_code == 200
    assert JobRun.objects.get().tests_total == 6


def test_test_results_count_errors_xfailed_and_xpassed_as_backends_report_them(post, base):
    counts = {"passed": 90, "failed": 3, "skipped": 4, "errors": 2, "xfailed": 5, "xpassed": 1}
    assert post(mutate(base, ("workflow", "test_results"), counts)).status_code == 200
    job = JobRun.objects.get()
    assert (job.tests_failed, job.tests_error, job.tests_xfailed, job.tests_xpassed, job.tests_total) == (
        3,
        2,
        5,
        1,
        105,
    )


def test_the_accelerator_classified_count_is_kept_apart_from_the_outcomes_and_their_total(post, base):
    counts = {"passed": 90, "failed": 3, "skipped": 4, "accelerator_ran": 40}
    assert post(mutate(base, ("workflow", "test_results"), counts)).status_code == 200
    job = JobRun.objects.get()
    assert (job.tests_total, job.tests_accelerator_ran) == (97, 40)
    bad = mutate(base, ("workflow", "test_results"), {"passed": 1, "accelerator_ran": -1})
    assert post(bad).status_code == 400


def test_the_jobs_api_returns_every_count_as_the_producer_printed_it(post, base, client):
    counts = {"passed": 90, "failed": 3, "skipped": 4, "errors": 2, "xfailed": 5, "xpassed": 1}
    post(mutate(base, ("workflow", "test_results"), counts))
    (job,) = client.get("/api/v1/jobs").json()["results"]
    assert {k: job[f"tests_{k}"] for k in ("passed", "failed", "skipped", "error", "xfailed", "xpassed", "total")} == {
        "passed": 90,
        "failed": 3,
        "skipped": 4,
        "error": 2,
        "xfailed": 5,
        "xpassed": 1,
        "total": 105,
    }


def test_each_failed_test_keeps_the_outcome_it_was_reported_with(post, base):
    tests = [{"name": "test_a"}, {"name": "test_b", "outcome": "error"}, {"name": "test_c", "outcome": "xpassed"}]
    assert post(mutate(base, ("workflow", "failed_tests"), tests)).status_code == 200
    assert dict(FailedTest.objects.values_list("name", "outcome")) == {
        "test_a": "failed",
        "test_b": "error",
        "test_c": "xpassed",
    }


def test_a_retried_attempt_never_overwrites_the_first_attempt_s_failed_tests(post, base):
    first = mutate(base, ("workflow", "failed_tests"), [{"name": "test_a"}, {"name": "test_b"}])
    assert post(first).status_code == 200
    retry = mutate(mutate(first, ("workflow", "run_attempt"), "2"), ("workflow", "failed_tests"), [{"name": "test_c"}])
    assert post(retry).status_code == 200
    by_attempt = {
        job.run_attempt: sorted(job.failed_tests.values_list("name", flat=True)) for job in JobRun.objects.all()
    }
    assert by_attempt == {1: ["test_a", "test_b"], 2: ["test_c"]}


def test_every_github_conclusion_is_accepted(post, base):
    for index, conclusion in enumerate(
        ["success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required", "stale"]
    ):
        body = mutate(base, ("workflow", "conclusion"), conclusion)
        body["workflow"]["job_name"] = f"job-{index}"
        assert post(body).status_code == 200, conclusion


def test_a_pr_callbacks_pytorch_head_sha_never_overrides_the_dispatched_head(post, base):
    """The SHA of a PR or push callback is the dispatch's; a self-report alone may name its own."""
    assert post({**base, "pytorch_head_sha": "f" * 40}).status_code == 200
    assert JobRun.objects.get().head_sha == "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


# --- what no database can store, however it is spelled ---------------------------------------------


@pytest.mark.parametrize(
    "raw, problem",
    [
        (b'{"workflow": {"name": "ci\\u0000"}}', "NUL"),
        (b'{"w\\u0000": 1}', "NUL"),
        (b'{"workflow": {"name": "ci\\ud800"}}', "lone surrogate"),
        (b'{"workflow": {"name": "ci\xed\xa0\x80"}}', "lone surrogate"),  # a surrogate as UTF-8-style bytes
        ('{"workflow": {"name": "ci\\u0000"}}'.encode("utf-16"), "NUL"),  # UTF-16: json detects it
    ],
    ids=["escaped NUL", "escaped NUL in a key", "escaped surrogate", "surrogate bytes", "UTF-16 body with a NUL"],
)
def test_body_parse_refuses_unstorable_text_in_every_spelling(raw, problem):
    from relay.callbacks.body import BadCallback, body_parse

    with pytest.raises(BadCallback, match=problem):
        body_parse(raw)


def test_body_parse_accepts_text_that_only_looks_suspicious():
    from relay.callbacks.body import body_parse

    hangul = '{"workflow": {"name": "퍼지 \\\\u0041"}}'.encode()  # 0xED lead bytes, an escaped backslash
    assert body_parse(hangul) == {"workflow": {"name": "퍼지 \\u0041"}}
    assert body_parse(b"") == {}
