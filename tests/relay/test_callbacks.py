"""POST /github/callback: binding to dispatches, the job state machine, timing and stored results."""

import json
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from relay.dispatch.sending import dispatch_client_payload
from relay.models import Dispatch, FailedTest, JobRun, UsedToken
from tests.conftest import action_body, callback_sender
from tests.factories import DispatchFactory, ProjectFactory

pytestmark = pytest.mark.django_db

REPO, REPO_ID = "intel/torch-xpu-ops", 123456


@pytest.fixture
def project(db):
    return ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")


@pytest.fixture
def dispatch(project):
    return DispatchFactory(project=project, state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(seconds=90))


@pytest.fixture
def payload(dispatch):
    return dispatch_client_payload(dispatch)


@pytest.fixture
def call(client, oidc):
    return callback_sender(client, oidc, REPO, REPO_ID)


def test_it_records_in_progress_then_completed_with_queue_and_execution_time(call, payload, dispatch):
    started = call(action_body(payload, "in_progress"))
    assert started.status_code == 200
    assert started.json() == {"ok": True, "status": "in_progress"}
    job = JobRun.objects.get()
    assert job.status == "in_progress" and job.pr_number == dispatch.pr_number and job.head_sha == dispatch.head_sha
    assert 89 <= job.queue_seconds <= 120
    JobRun.objects.filter(pk=job.pk).update(in_progress_at=timezone.now() - timedelta(seconds=300))
    done = call(action_body(payload, "completed", "failure", test_results={"passed": 10, "failed": 2, "skipped": 1}))
    assert done.json() == {"ok": True, "status": "completed"}
    job.refresh_from_db()
    assert (job.status, job.conclusion) == ("completed", "failure")
    assert 299 <= job.execution_seconds <= 330
    assert (job.tests_passed, job.tests_failed, job.tests_skipped, job.tests_total) == (10, 2, 1, 13)
    assert job.workflow_url.endswith("/actions/runs/4242") and job.check_run_id == "4242-1"


def test_it_answers_an_exact_repeat_as_duplicate(call, payload):
    assert call(action_body(payload, "in_progress")).json()["status"] == "in_progress"
    assert call(action_body(payload, "in_progress")).json() == {"ok": True, "status": "duplicate"}
    assert call(action_body(payload, "completed", "success")).json()["status"] == "completed"
    assert call(action_body(payload, "completed", "success")).json()["status"] == "duplicate"
    assert JobRun.objects.count() == 1


def test_it_refuses_in_progress_after_completed(call, payload):
    call(action_body(payload, "in_progress"))
    call(action_body(payload, "completed", "success"))
    response = call(action_body(payload, "in_progress"))
    assert response.status_code == 409
    assert "already completed" in response.json()["detail"]


def test_it_refuses_a_second_completion_with_another_conclusion(call, payload):
    call(action_body(payload, "completed", "success"))
    assert call(action_body(payload, "completed", "failure")).status_code == 409


def test_it_accepts_completed_without_in_progress_and_marks_the_start_unknown(call, payload):
    assert call(action_body(payload, "completed", "failure")).json()["status"] == "completed"
    job = JobRun.objects.get()
    assert job.start_unknown and job.queue_seconds is None and job.execution_seconds is None


def test_it_keys_jobs_by_run_attempt_and_job_name(call, payload):
    call(action_body(payload, "in_progress", job="build"))
    call(action_body(payload, "in_progress", job="test-1"))
    call(action_body(payload, "in_progress", job="build", attempt="2"))
    call(action_body(payload, "in_progress", job="build", run_id="5555"))
    assert JobRun.objects.count() == 4


def test_it_accepts_a_buildkite_uuid_run_id_and_a_numeric_attempt(call, payload):
    body = action_body(payload, "in_progress", run_id="018f2c3a-1b2c-4d5e-8f90-0123456789ab")
    body["workflow"]["run_attempt"] = 2
    assert call(body).json()["status"] == "in_progress"
    assert JobRun.objects.get().run_attempt == 2


def test_it_leaves_a_rerun_queue_time_empty_when_the_rerun_request_is_unknown(call, payload):
    call(action_body(payload, "in_progress", attempt="2"))
    assert JobRun.objects.get().queue_seconds is None


def test_it_measures_a_rerun_queue_time_from_the_rerun_request(call, payload, dispatch):
    from relay.models import RerunRequest

    RerunRequest.objects.create(
        project=dispatch.project, run_id="4242", kind="failed", requested_at=timezone.now() - timedelta(seconds=40)
    )
    call(action_body(payload, "in_progress", attempt="2"))
    assert 39 <= JobRun.objects.get().queue_seconds <= 60


def test_it_stores_failed_tests_with_caps_and_the_environment(call, payload):
    failed = [
        {
            "name": f"test_{i}",
            "classname": "TestOps",
            "message": "m" * 1100,
            "stacktrace": "s" * (9000 if i < 5 else 10),
        }
        for i in range(1200)
    ]
    body = action_body(
        payload, "completed", "failure", failed_tests=failed, environment={"device": "xpu", "torch_version": "2.12.0a0"}
    )
    assert call(body).status_code == 200
    job = JobRun.objects.get()
    assert job.failed_tests_truncated and job.failed_tests.count() == 1000
    test = job.failed_tests.first()
    assert len(test.message.encode()) <= 1024 and len(test.stacktrace.encode()) <= 4096 and test.truncated
    assert job.environment == {"device": "xpu", "torch_version": "2.12.0a0"}


@pytest.mark.parametrize(
    "completed_with, stored", [([{"name": "test_b"}], ["test_b"]), ([], [])], ids=["new failures", "none"]
)
def test_a_completion_replaces_the_failed_tests_its_in_progress_report_sent(call, payload, completed_with, stored):
    call(action_body(payload, "in_progress", failed_tests=[{"name": "test_a"}]))
    conclusion = "failure" if completed_with else "success"
    assert call(action_body(payload, "completed", conclusion, failed_tests=completed_with)).status_code == 200
    assert list(FailedTest.objects.values_list("name", flat=True)) == stored


def test_a_completion_keeps_what_its_in_progress_said_where_it_says_nothing(call, payload):
    started = action_body(payload, "in_progress", environment={"device": "xpu"}, check_run_id="77-1")
    started["workflow"]["artifact_url"] = "https://example.com/artifacts/77"
    call(started)
    done = action_body(payload, "completed", "success", url="", check_run_id="", started_at=None)
    assert call(done).json()["status"] == "completed"
    job = JobRun.objects.get()
    assert (job.workflow_url, job.check_run_id, job.artifact_url) == (
        "https://github.com/intel/torch-xpu-ops/actions/runs/4242",
        "77-1",
        "https://example.com/artifacts/77",
    )
    assert job.environment == {"device": "xpu"} and job.reported_started_at is not None
    assert job.reported_completed_at is not None and job.event_type == "pull_request"


def test_a_completion_that_says_more_replaces_what_in_progress_said(call, payload):
    call(action_body(payload, "in_progress", environment={"device": "xpu"}))
    call(
        action_body(payload, "completed", "failure", environment={"device": "xpu", "driver": "1.3"}, url="https://ci/9")
    )
    job = JobRun.objects.get()
    assert (job.environment, job.workflow_url) == ({"device": "xpu", "driver": "1.3"}, "https://ci/9")


def test_the_execution_time_runs_from_in_progress_to_the_completion_on_the_relays_clock(call, payload, monkeypatch):
    from relay.callbacks import receive

    call(action_body(payload, "in_progress"))
    completed_at = timezone.now().replace(microsecond=500000)
    JobRun.objects.update(in_progress_at=completed_at - timedelta(seconds=12, microseconds=345600))
    monkeypatch.setattr(receive.timezone, "now", lambda: completed_at)
    call(action_body(payload, "completed", "success"))
    job = JobRun.objects.get()
    assert (job.completed_at, job.execution_seconds) == (completed_at, 12.346)


def test_a_real_completion_replaces_the_sweepers_timeout_verdict(call, payload):
    call(action_body(payload, "in_progress"))
    JobRun.objects.update(status="completed", conclusion="timed_out", ended_by="timed_out")
    assert call(action_body(payload, "completed", "success")).json()["status"] == "completed"
    job = JobRun.objects.get()
    assert (job.status, job.conclusion, job.ended_by) == ("completed", "success", "")
    assert job.execution_seconds is not None


def test_a_second_identical_completion_after_a_real_one_is_a_duplicate_not_a_replacement(call, payload):
    call(action_body(payload, "in_progress"))
    call(action_body(payload, "completed", "failure", test_results={"passed": 1, "failed": 1}))
    again = action_body(payload, "completed", "failure", test_results={"passed": 5, "failed": 1})
    assert call(again).json()["status"] == "duplicate"
    assert JobRun.objects.get().tests_passed == 1


def _signed_payload(payload, dispatch, **binding):
    from relay.callbacks.tokens import CallbackBinding, callback_token_sign

    fields = {"delivery_guid": dispatch.delivery.guid, "repo": REPO, "pr_number": dispatch.pr_number}
    token = callback_token_sign(CallbackBinding(**{**fields, "head_sha": dispatch.head_sha, **binding}))
    return {**payload, "payload": {}, "callback_token": token}  # echoes no PR or head of its own


@pytest.mark.parametrize(
    "refused", ["another repo's token", "a forged token", "no token at L4", "another head SHA", "its dispatch gone"]
)
def test_a_completion_is_bound_to_its_dispatch_like_its_in_progress(call, payload, project, dispatch, refused):
    assert call(action_body(payload, "in_progress")).status_code == 200
    if refused == "another repo's token":
        other = DispatchFactory(delivery=dispatch.delivery, project=ProjectFactory(), state="sent")
        payload = {**payload, "callback_token": dispatch_client_payload(other)["callback_token"]}
    elif refused == "a forged token":
        payload = {**payload, "callback_token": payload["callback_token"][:-4] + "AAAA"}
    elif refused == "no token at L4":
        from relay.callbacks.identity import project_lookups_forget

        project.level, project.device = "L4", ""
        project.save()
        project_lookups_forget()  # as the registry cache does within seconds
        payload = {**payload, "callback_token": ""}
    elif refused == "another head SHA":
        payload = _signed_payload(payload, dispatch, head_sha="f" * 40)
    else:
        dispatch.delete()
    response = call(action_body(payload, "completed", "success"))
    assert response.status_code == 403, response.json()
    assert JobRun.objects.get().status == "in_progress"
    assert UsedToken.objects.count() == 1


def test_a_token_that_completed_the_job_is_still_refused_with_a_binding_for_another_head(call, payload, dispatch, oidc):
    token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    call(action_body(payload, "in_progress"))
    assert call(action_body(payload, "completed", "success"), token=token).status_code == 200
    forged = _signed_payload(payload, dispatch, head_sha="f" * 40)
    replay = call(action_body(forged, "completed", "success"), token=token)
    assert replay.status_code == 403, replay.json()  # not "duplicate": the binding is checked first, as ever


def test_the_sweepers_never_started_row_cannot_be_completed_by_its_run_id(call, project):
    from relay.dispatch.results_sweep import results_sweep

    silent = DispatchFactory(project=project, state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(hours=7))
    results_sweep()
    body = action_body(dispatch_client_payload(silent), "completed", "success", run_id="-", job="")
    assert call(body).status_code == 400
    assert JobRun.objects.get().ended_by == "never_started"


def test_a_completion_echoing_only_its_token_is_accepted(call, payload, dispatch):
    assert call(action_body(payload, "in_progress")).status_code == 200
    assert call(action_body(_signed_payload(payload, dispatch), "completed", "success")).status_code == 200
    assert JobRun.objects.get().status == "completed"


def test_a_first_callback_replaces_the_sweepers_never_started_row_and_nothing_else(call, project):
    from relay.dispatch.results_sweep import results_sweep

    silent = DispatchFactory(project=project, state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(hours=7))
    other = DispatchFactory(project=project, state=Dispatch.State.SENT, sent_at=timezone.now() - timedelta(hours=7))
    assert results_sweep().never_started == 2
    assert call(action_body(dispatch_client_payload(silent), "in_progress")).json()["status"] == "in_progress"
    rows = JobRun.objects.order_by("dispatch_id").values_list("dispatch_id", "ended_by")
    assert list(rows) == sorted([(silent.pk, ""), (other.pk, "never_started")])


def test_it_refuses_a_body_over_2_mb(call, payload):
    response = call(
        action_body(payload, "completed", "failure", failed_tests=[{"name": "t", "message": "x" * 2_200_000}])
    )
    assert response.status_code == 413


def test_it_ignores_an_unregistered_repo(call, payload):
    response = call(action_body(payload, "in_progress"), repository="someone/else", repository_id=1)
    assert response.json() == {"ok": True, "status": "ignored"}
    assert not JobRun.objects.exists()


def test_it_ignores_an_l1_repo(call, payload, project):
    project.level = "L1"
    project.save()
    assert call(action_body(payload, "in_progress")).json()["status"] == "ignored"


def test_it_matches_the_repo_name_case_insensitively(call, payload):
    assert call(action_body(payload, "in_progress"), repository=REPO.upper()).json()["status"] == "in_progress"


def test_it_refuses_a_callback_for_a_delivery_never_dispatched_to_the_repo(call, payload):
    body = action_body({**payload, "delivery_id": "never-sent", "callback_token": ""}, "in_progress")
    response = call(body)
    assert response.status_code == 403
    assert "never dispatched" in response.json()["detail"]


def test_it_refuses_a_callback_token_issued_for_another_repo(call, payload, dispatch):
    other = DispatchFactory(delivery=dispatch.delivery, project=ProjectFactory(), state="sent")
    body = action_body({**payload, "callback_token": dispatch_client_payload(other)["callback_token"]}, "in_progress")
    assert call(body).status_code == 403


def test_it_refuses_a_forged_callback_token(call, payload):
    assert (
        call(
            action_body({**payload, "callback_token": payload["callback_token"][:-4] + "AAAA"}, "in_progress")
        ).status_code
        == 403
    )


def test_it_requires_the_callback_token_at_l3_and_l4(call, payload, project):
    project.level, project.device = "L4", ""
    project.save()
    response = call(action_body({**payload, "callback_token": ""}, "in_progress"))
    assert response.status_code == 403
    assert "callback_token" in response.json()["detail"]


def test_it_accepts_no_callback_token_at_l2_like_the_existing_action(call, payload):
    assert (
        call(action_body({k: v for k, v in payload.items() if k != "callback_token"}, "in_progress")).status_code == 200
    )


def test_it_refuses_a_replayed_token_for_another_callback(call, payload, oidc):
    token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    assert call(action_body(payload, "in_progress"), token=token).status_code == 200
    response = call(action_body(payload, "in_progress", job="other"), token=token)
    assert response.status_code == 401
    assert "already used" in response.json()["detail"]
    # Nothing of the refused callback stays, and the test's enclosing transaction still works: on
    # SQLite an unread cursor of the job's speculative INSERT had broken it.
    assert list(JobRun.objects.values_list("job_name", flat=True)) == ["build"]
    assert UsedToken.objects.count() == 1


def test_a_refused_replay_of_a_completion_leaves_the_job_as_it_was(call, payload, oidc):
    token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    assert call(action_body(payload, "in_progress"), token=token).status_code == 200
    assert call(action_body(payload, "completed", "success", job="build"), token=token).status_code == 401
    assert JobRun.objects.get().status == "in_progress" and UsedToken.objects.count() == 1


def test_it_answers_a_retry_with_the_same_token_as_duplicate(call, payload, oidc):
    token = oidc.mint(repository=REPO, repository_id=str(REPO_ID))
    assert call(action_body(payload, "in_progress"), token=token).json()["status"] == "in_progress"
    assert call(action_body(payload, "in_progress"), token=token).json()["status"] == "duplicate"
    assert UsedToken.objects.count() == 1


def test_it_rate_limits_per_repo_with_retry_after(call, payload, project, settings):
    from django.core.cache import cache

    cache.clear()
    project.rate_limit_per_min = 3
    project.save()
    statuses = [call(action_body(payload, "in_progress", job=f"j{i}")).status_code for i in range(5)]
    assert statuses == [200, 200, 200, 429, 429]
    limited = call(action_body(payload, "in_progress", job="j9"))
    assert int(limited["Retry-After"]) >= 1
    assert JobRun.objects.count() == 3


@pytest.mark.parametrize("refused", ["bad report", "never dispatched"])
def test_a_repo_over_its_limit_hears_429_whatever_its_report_says(call, payload, project, refused):
    from django.core.cache import cache

    cache.clear()
    project.rate_limit_per_min = 1
    project.save()
    assert call(action_body(payload, "in_progress", job="first")).status_code == 200
    body = action_body(payload, "in_progress", job="second")
    if refused == "bad report":
        body["workflow"]["status"] = "sleeping"
    else:
        body["delivery_id"] = "never-sent"
    assert call(body).status_code == 429
    assert call(body).status_code == 429  # and, refused, it counts


@pytest.mark.parametrize(("limit", "answer"), [(1, 429), (100, 503)])
def test_a_database_error_recording_the_callback_is_answered_after_the_rate_limit(
    call, payload, project, monkeypatch, limit, answer
):
    from django.core.cache import cache
    from django.db import OperationalError

    from relay.callbacks import job_rows

    cache.clear()
    project.rate_limit_per_min = limit
    project.save()
    assert call(action_body(payload, "in_progress", job="first")).status_code == 200

    def database_down(*args):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(job_rows, "_first_row", database_down)
    assert call(action_body(payload, "in_progress", job="second")).status_code == answer


def _broken(*args, **kwargs):
    raise ConnectionError("cache down")


def _redis_nobody_listens_on():
    """A real redis-py client for a port nothing listens on: every connect is refused."""
    import socket

    import redis

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=1, socket_timeout=1)


@pytest.mark.parametrize("cache_kind", ["redis", "django-cache-api"])
def test_it_keeps_callbacks_flowing_when_the_rate_limiter_cache_is_down(call, payload, monkeypatch, cache_kind):
    from django.core.cache import cache

    from relay.callbacks import ratelimit

    if cache_kind == "redis":
        down = _redis_nobody_listens_on()
        monkeypatch.setattr(ratelimit, "redis_of", lambda: down)
    else:
        monkeypatch.setattr(ratelimit, "redis_of", lambda: None)
        monkeypatch.setattr(cache, "incr", _broken)
    response = call(action_body(payload, "in_progress"))
    assert response.status_code == 200
    assert response["X-RateLimit-Degraded"] == "true"


def test_the_rate_limit_counts_in_one_window_on_whichever_cache_is_configured(db):
    import uuid

    from relay.callbacks.ratelimit import rate_limit_hit

    repo = f"Org/Counted-{uuid.uuid4().hex}"  # a shared Redis keeps counters for two minutes
    decisions = [rate_limit_hit(repo, limit=3, now=1_800_000_010.0) for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert decisions[-1].retry_after == 51
    assert rate_limit_hit(repo.lower(), limit=3, now=1_800_000_070.0).allowed  # the next window


@pytest.mark.django_db(transaction=True)
def test_exactly_one_of_two_concurrent_identical_callbacks_wins(client, oidc, settings):
    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L2")
    dispatch = DispatchFactory(project=project, state="sent", sent_at=timezone.now())
    body = json.dumps(action_body(dispatch_client_payload(dispatch), "completed", "success"))
    tokens = [oidc.mint(repository=REPO, repository_id=str(REPO_ID)) for _ in range(4)]
    answers, barrier = [], threading.Barrier(4)

    def send(token):
        from django.test import Client

        barrier.wait()
        answers.append(
            Client()
            .post("/github/callback", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
            .json()
            .get("status")
        )

    threads = [threading.Thread(target=send, args=(t,)) for t in tokens]
    [t.start() for t in threads]
    [t.join(timeout=30) for t in threads]
    assert sorted(answers) == ["completed", "duplicate", "duplicate", "duplicate"]
    assert JobRun.objects.count() == 1


def test_it_writes_nothing_when_storing_the_results_fails(call, payload, monkeypatch):
    from relay.callbacks import job_rows

    call(action_body(payload, "in_progress"))

    def boom(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(job_rows, "failed_tests_insert", boom)  # the transaction's (SQLite)
    monkeypatch.setattr(job_rows, "_failed_tests_arrays", boom)  # the one statement's (PostgreSQL)
    with pytest.raises(RuntimeError):
        call(action_body(payload, "completed", "failure", failed_tests=[{"name": "t"}]))
    assert JobRun.objects.get().status == "in_progress", "state did not advance without its results"
    assert not FailedTest.objects.exists() and UsedToken.objects.count() == 1


def test_a_job_statement_that_fails_after_the_tokens_insert_was_sent_leaves_nothing_and_breaks_nothing(
    client, call, payload, monkeypatch
):
    from django.db import transaction

    from relay.callbacks import job_rows

    client.raise_request_exception = False  # PostgreSQL's undefined table is a 500, SQLite's a 503
    failing = job_rows.Change("SELECT * FROM no_such_table", [], (), inserts=True)
    monkeypatch.setattr(job_rows, "job_insert_change", lambda values, made_from=None: failing)
    with transaction.atomic():  # a caller's transaction around the callback's
        assert call(action_body(payload, "in_progress")).status_code in (500, 503)
        assert not JobRun.objects.exists() and not UsedToken.objects.exists()


def test_an_optional_workflow_job_id_is_stored_kept_by_the_completion_and_links_the_jobs_page(call, payload):
    from hud.templatetags.hud_tags import job_log_url

    assert call(action_body(payload, "in_progress", job_id=31415926535)).json()["status"] == "in_progress"
    assert call(action_body(payload, "completed", "success")).json()["status"] == "completed"
    job = JobRun.objects.get()
    assert job.job_id == "31415926535" and job.check_run_id == "4242-1"
    assert job_log_url(job) == "https://github.com/intel/torch-xpu-ops/actions/runs/4242/job/31415926535"


def test_a_callback_without_job_id_stores_none_and_links_by_a_numeric_check_run_id(call, payload):
    from hud.templatetags.hud_tags import job_log_url

    assert call(action_body(payload, "completed", "success", check_run_id="271828")).status_code == 200
    job = JobRun.objects.get()
    assert job.job_id == "" and job_log_url(job).endswith("/actions/runs/4242/job/271828")


@pytest.mark.parametrize("value", [True, {"id": 1}, "x" * 101])
def test_a_job_id_that_is_not_a_short_string_or_number_is_refused(call, payload, value):
    answer = call(action_body(payload, "in_progress", job_id=value))
    assert answer.status_code == 400 and "workflow.job_id" in answer.json()["detail"]
    assert not JobRun.objects.exists()


@pytest.mark.parametrize("said", ["bisect", "push", "anything"])
@pytest.mark.parametrize("steps", [("in_progress", "completed"), ("completed",)])
def test_a_dispatchs_job_takes_the_dispatchs_event_type_never_the_callbacks(call, payload, said, steps):
    """Issue 52 item 5: a PR dispatch answered as `bisect` (or `push`, or anything) was stored under
    it and vanished from cells, the gate and tallies; `bisect` belongs to a probe's key only."""
    for status in steps:
        body = {**action_body(payload, status, "failure" if status == "completed" else None), "event_type": said}
        assert call(body).status_code == 200
        assert JobRun.objects.get().event_type == "pull_request"
