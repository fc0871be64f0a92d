"""`workflow.triage_verdict` as the callback action documents it: kept normalised when it keeps the
schema, dropped whole on a structural violation without costing the callback, cut where a string
runs long, stored on its attempt and shown on /api/v1/jobs as advice that changes no conclusion."""

import copy
import json
import logging

import pytest
from django.utils import timezone

from relay.callbacks.triage_verdict import MAX_BYTES, plain_http_url, triage_verdict_read
from relay.dispatch.sending import dispatch_client_payload
from relay.models import JobRun
from tests.conftest import action_body, callback_sender
from tests.factories import DispatchFactory, ProjectFactory

REPO, REPO_ID = "ascend/pytorch", 424242

VERDICT = {
    "schema_version": 1,
    "category": "upstream",
    "confidence": "high",
    "summary": "test_addmm fails on the reference too since #170001 changed the addmm decomposition",
    "suspected_upstream": {"pr": 170001, "commit": "ABCDEF1234567", "reason": "touches aten/addmm"},
    "evidence": [
        {
            "job": "test (npu, 1, 2)",
            "test": "test_ops.py::TestCommonNPU::test_addmm_npu_float32",
            "excerpt": "AssertionError: Tensor-likes are not close!",
            "log_url": "https://github.com/ascend/pytorch/actions/runs/77/job/88",
        }
    ],
    "reproduced_on_retry": True,
    "analyzer": {"name": "ci-triage-bot", "version": "0.4.1", "model": "m-large", "prompt_version": "7"},
    "analyzed_at": "2026-12-03T10:15:00Z",
}


def verdict(**changes) -> dict:
    raw = copy.deepcopy(VERDICT)
    for key, value in changes.items():
        if value is ...:
            raw.pop(key)
        else:
            raw[key] = value
    return raw


# --- reading ----------------------------------------------------------------------------------------


def test_a_verdict_in_the_documented_shape_is_kept_normalised():
    kept, dropped = triage_verdict_read(verdict(schema_version="1", unknown_key={"x": 1}))
    assert dropped == ""
    assert kept["schema_version"] == 1 and "unknown_key" not in kept
    assert kept["suspected_upstream"] == {"pr": 170001, "commit": "abcdef1234567", "reason": "touches aten/addmm"}
    assert kept["evidence"][0]["log_url"] == "https://github.com/ascend/pytorch/actions/runs/77/job/88"
    assert kept["analyzer"]["prompt_version"] == "7" and kept["analyzed_at"] == "2026-12-03T10:15:00+00:00"


def test_only_category_confidence_and_summary_are_required():
    kept, _ = triage_verdict_read({"schema_version": 1, "category": "flake", "confidence": "low", "summary": "retry"})
    assert kept == {
        "schema_version": 1,
        "category": "flake",
        "confidence": "low",
        "summary": "retry",
        "suspected_upstream": None,
        "evidence": [],
        "reproduced_on_retry": None,
        "analyzer": {},
        "analyzed_at": None,
    }


@pytest.mark.parametrize(
    "raw",
    [
        "upstream",
        [VERDICT],
        verdict(schema_version=2),
        verdict(schema_version=True),
        verdict(schema_version=...),
        verdict(category="hardware"),
        verdict(category=...),
        verdict(confidence="certain"),
        verdict(summary=""),
        verdict(summary=42),
        verdict(summary=True),
        verdict(category="backend"),  # a suspect with a category other than upstream
        verdict(suspected_upstream={"pr": True}),
        verdict(suspected_upstream={"pr": 0}),
        verdict(suspected_upstream={"pr": "170001"}),
        verdict(suspected_upstream={"commit": "xyz1234"}),
        verdict(suspected_upstream={"commit": "abc12"}),
        verdict(suspected_upstream={"reason": "no pr, no commit"}),
        verdict(suspected_upstream="#170001"),
        verdict(evidence={"job": "x"}),
        verdict(evidence=["a line"]),
        verdict(evidence=[{"log_url": "javascript:alert(1)"}]),
        verdict(evidence=[{"log_url": "https://user@evil.example/x"}]),
        verdict(evidence=[{"log_url": "https://ok.example/a b"}]),
        verdict(evidence=[{"log_url": "https://ok.example/\nx"}]),
        verdict(evidence=[{"log_url": "//no-scheme.example/x"}]),
        verdict(evidence=[{"log_url": 5}]),
        verdict(evidence=[{"test": 5}]),
        verdict(reproduced_on_retry="yes"),
        verdict(analyzer="bot"),
        verdict(analyzer={"name": 1}),
        verdict(analyzed_at="yesterday"),
        verdict(analyzed_at="2026-13-40T00:00:00Z"),
        verdict(summary="s" * (MAX_BYTES + 1)),
    ],
)
def test_a_structural_violation_drops_the_whole_verdict_and_says_why(raw):
    kept, dropped = triage_verdict_read(raw)
    assert kept is None and dropped.startswith("triage_verdict")


def test_over_long_strings_are_cut_and_evidence_past_ten_is_left_out():
    raw = verdict(
        summary="s" * 1500,
        suspected_upstream={"pr": 1, "reason": "r" * 400},
        evidence=[{"test": "t" * 210, "excerpt": "e" * 1010}] * 11,
        analyzer={"name": "n" * 150},
    )
    assert len(json.dumps(raw)) < MAX_BYTES, "within the 16 KB a verdict may take"
    kept, _ = triage_verdict_read(raw)
    assert len(kept["summary"]) == 1000 and len(kept["suspected_upstream"]["reason"]) == 300
    assert len(kept["evidence"]) == 10
    assert (len(kept["evidence"][0]["test"]), len(kept["evidence"][0]["excerpt"])) == (200, 1000)
    assert len(kept["analyzer"]["name"]) == 100


def test_a_verdict_sent_as_its_json_text_reads_the_same():
    assert triage_verdict_read(json.dumps(VERDICT)) == triage_verdict_read(VERDICT)
    assert triage_verdict_read("{not json")[0] is None


def test_a_callback_takes_failed_tests_detail_sent_as_json_text(call, payload):
    detail = json.dumps([{"name": "test_add", "classname": "TestOps", "duration": 0.5}])
    assert call(action_body(payload, "completed", "failure", failed_tests=detail)).status_code == 200
    assert [t.name for t in JobRun.objects.get().failed_tests.all()] == ["test_add"]


def test_none_sent_is_no_verdict_and_no_complaint():
    assert triage_verdict_read(None) == (None, "")


@pytest.mark.parametrize(
    "url, plain",
    [
        ("https://buildkite.com/vllm/ci/builds/1#job", True),
        ("http://10.0.0.1:8080/log", True),
        ("HTTPS://EXAMPLE.ORG/x", True),
        ("ftp://example.org/x", False),
        ("https://a@b.example/", False),
        ("https:///path-only", False),
        ("https://[::1/x", False),
        ("https://ex\tample.org", False),
    ],
)
def test_a_log_url_must_be_a_plain_http_url_with_a_host(url, plain):
    assert plain_http_url(url) is plain


# --- on a callback ----------------------------------------------------------------------------------


@pytest.fixture
def payload(db):
    project = ProjectFactory(full_name=REPO, github_repo_id=REPO_ID, level="L3", device="npu")
    return dispatch_client_payload(DispatchFactory(project=project, state="sent", sent_at=timezone.now()))


@pytest.fixture
def call(client, oidc):
    return callback_sender(client, oidc, REPO, REPO_ID)


def test_a_callback_stores_the_verdict_on_its_attempt_and_the_conclusion_stays_its_own(call, payload):
    assert call(action_body(payload, "in_progress")).status_code == 200
    done = call(action_body(payload, "completed", "failure", triage_verdict=VERDICT))
    assert done.status_code == 200 and done.json() == {"ok": True, "status": "completed"}
    job = JobRun.objects.get()
    assert job.conclusion == "failure" and job.triage_verdict["category"] == "upstream"
    retry = call(action_body(payload, "completed", "success", attempt="2"))
    assert retry.status_code == 200
    first, second = JobRun.objects.order_by("run_attempt")
    assert first.triage_verdict["summary"] == VERDICT["summary"] and second.triage_verdict is None


def test_a_hostile_verdict_is_dropped_and_the_callback_is_kept(call, payload, caplog):
    hostile = verdict(category="backend", evidence=[{"log_url": "javascript:alert(document.cookie)"}])
    with caplog.at_level(logging.WARNING, logger="relay.callbacks.body"):
        response = call(action_body(payload, "completed", "failure", triage_verdict=hostile))
    assert response.status_code == 200 and response.json()["status"] == "completed"
    job = JobRun.objects.get()
    assert (job.conclusion, job.triage_verdict) == ("failure", None)
    assert "triage verdict dropped" in caplog.text


def test_the_jobs_api_carries_the_normalised_verdict_or_null(call, payload, client):
    call(action_body(payload, "completed", "failure", job="a", triage_verdict=verdict(summary="x" * 2000)))
    call(action_body(payload, "completed", "success", job="b"))
    jobs = {j["job_name"]: j for j in client.get("/api/v1/jobs").json()["results"]}
    assert jobs["b"]["triage_verdict"] is None
    shown = jobs["a"]["triage_verdict"]
    assert len(shown["summary"]) == 1000 and shown["suspected_upstream"]["pr"] == 170001
    assert (
        shown["evidence"][0]["test"].endswith("test_addmm_npu_float32") and shown["analyzer"]["name"] == "ci-triage-bot"
    )
