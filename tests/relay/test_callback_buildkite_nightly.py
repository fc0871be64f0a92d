"""Buildkite nightly reporters, in the shape vLLM's reporter sends (vllm-project/vllm #51830,
reference/upstream-changes.md): one `completed` callback per script job of a build, with
`event_type: "nightly"`, `delivery_id: "buildkite-<build number>-<job uuid>"`, the tested upstream
commit as a top-level `pytorch_head_sha`, an integer `run_id` (the build number), `run_attempt: 1`,
job labels full of quotes, colons and emoji, and one Buildkite OIDC token for the whole build."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from hud.selectors_backend import cell_detail, dashboard_build, heads_in_window
from relay.models import JobRun
from tests.conftest import UPSTREAM, UPSTREAM_ID, callback_post
from tests.factories import ProjectFactory

pytestmark = pytest.mark.django_db

ORG, PIPELINE = "018b5ec5-5a2e-4b8c-9d61-0c3f1a7e2b10", "018cdabc-7f41-4e0d-8a93-6b2d5c1e9f20"
NIGHTLY_SHA = "3f1c2a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a"
# Buildkite job states → GitHub conclusions, as the reporter maps them.
CONCLUSION = {
    "passed": "success",
    "failed": "failure",
    "broken": "failure",
    "canceled": "cancelled",
    "timed_out": "timed_out",
    "skipped": "skipped",
    "not_run": "skipped",
}
LABELS = [
    ':pytest: Basic Correctness Test "torch.compile"',
    "Entrypoints Test (API Server): 🚀 :docker:",
    "V1 e2e + engine: 'spec decode' ✅",
    "LoRA TP Test (Distributed) :: 2 GPUs 🧪",
    'Kernels Attention Test %N "flash-attn: v3"',
]


def buildkite_build(number: int, commit: str, states: list[str]) -> dict:
    """The part of a Buildkite REST build object the reporter reads: number, commit, pipeline
    slug, jobs (script jobs with UUIDs, labels, states, web URLs, times) plus a waiter pseudo-job."""
    start = "2026-12-02T03:10:11.123Z"
    jobs = [
        {
            "id": str(uuid.uuid4()),
            "type": "script",
            "name": LABELS[i % len(LABELS)] + (f" #{i}" if i >= len(LABELS) else ""),
            "state": state,
            "web_url": f"https://buildkite.com/vllm/ci/builds/{number}#job-{i}",
            "started_at": None if state == "not_run" else start,
            "finished_at": "2026-12-02T04:02:55.456Z",
        }
        for i, state in enumerate(states)
    ]
    jobs.append({"id": str(uuid.uuid4()), "type": "waiter", "state": "passed"})
    return {"number": number, "commit": commit, "pipeline": {"slug": "ci"}, "jobs": jobs}


def reporter_bodies(build: dict) -> list[dict]:
    """One body per terminal script job, built the way the vLLM reporter builds it."""
    return [
        {
            "delivery_id": f"buildkite-{build['number']}-{job['id']}",
            "event_type": "nightly",
            "pytorch_head_sha": build["commit"],
            "workflow": {
                "status": "completed",
                "conclusion": CONCLUSION[job["state"]],
                "run_id": int(build["number"]),
                "run_attempt": 1,
                "name": build["pipeline"]["slug"],
                "job_name": job["name"],
                "url": job["web_url"],
                "started_at": job["started_at"],
                "completed_at": job["finished_at"],
            },
        }
        for job in build["jobs"]
        if job.get("type") == "script" and job.get("state") in CONCLUSION
    ]


@pytest.fixture
def vllm(standin, oidc):
    standin.add_installation(installation_id=1, account="pytorch")
    standin.add_repo(UPSTREAM, repo_id=UPSTREAM_ID, installation_id=1)
    standin.add_commit(UPSTREAM, NIGHTLY_SHA, message="nightly base")
    return ProjectFactory(
        full_name="vllm-project/vllm",
        level="L2",
        ci_provider="buildkite",
        buildkite_pipeline=f"{ORG}/{PIPELINE}",
        oidc_required_claims={"build_branch": ["main", "nightly"]},
        events=["nightly"],
    )


@pytest.fixture
def report(client, oidc):
    def post(body: dict, token: str | None = None):
        return callback_post(client, body, token or build_token(oidc))

    return post


def build_token(oidc) -> str:
    return oidc.mint(kind="buildkite", organization_id=ORG, pipeline_id=PIPELINE, build_branch="nightly")


def test_every_job_of_a_65_job_build_is_accepted_under_one_sha_and_one_run(vllm, report, oidc):
    """test-infra #8853: 65 jobs of one build were shown as 65 commits."""
    build = buildkite_build(
        5123, NIGHTLY_SHA, ["passed"] * 60 + ["failed", "broken", "canceled", "timed_out", "not_run"]
    )
    token = build_token(oidc)  # the reporter signs the whole build with one token
    answers = [report(body, token) for body in reporter_bodies(build)]
    assert [(a.status_code, a.json()) for a in answers] == [(200, {"ok": True, "status": "completed"})] * 65
    jobs = JobRun.objects.filter(project=vllm)
    assert jobs.count() == 65
    assert set(jobs.values_list("head_sha", "run_id", "run_attempt", "event_type", "workflow_name")) == {
        (NIGHTLY_SHA, "5123", 1, "nightly", "ci")
    }
    assert {j.delivery_key for j in jobs} == {b["delivery_id"] for b in reporter_bodies(build)}
    heads = heads_in_window(vllm, "nightly", timezone.now() - timedelta(days=1))
    assert [(h["head_sha"], h["runs"]) for h in heads] == [(NIGHTLY_SHA, 1)]


def test_job_labels_with_quotes_colons_and_emoji_are_kept_exactly(vllm, report):
    for body in reporter_bodies(buildkite_build(77, NIGHTLY_SHA, ["passed"] * len(LABELS))):
        assert report(body).status_code == 200
    assert set(JobRun.objects.values_list("job_name", flat=True)) == set(LABELS)


def test_a_rerun_of_the_reporting_step_is_idempotent_by_delivery_id(vllm, report, oidc):
    bodies = reporter_bodies(buildkite_build(900, NIGHTLY_SHA, ["passed", "failed"]))
    first, again = build_token(oidc), build_token(oidc)
    assert [report(b, first).json()["status"] for b in bodies] == ["completed", "completed"]
    assert [report(b, again).json()["status"] for b in bodies] == ["duplicate", "duplicate"]
    assert report(bodies[0], first).json()["status"] == "duplicate"
    assert JobRun.objects.count() == 2


def test_one_builds_token_cannot_report_another_build(vllm, report, oidc):
    token = build_token(oidc)
    [one] = reporter_bodies(buildkite_build(1, NIGHTLY_SHA, ["passed"]))
    [other] = reporter_bodies(buildkite_build(2, NIGHTLY_SHA, ["passed"]))
    assert report(one, token).status_code == 200
    assert report(other, token).status_code == 401


def test_several_builds_against_one_sha_share_one_row_counted_by_distinct_run(vllm, report):
    for number in (10, 11):
        for body in reporter_bodies(buildkite_build(number, NIGHTLY_SHA, ["passed", "failed", "passed"])):
            assert report(body).status_code == 200
    dash = dashboard_build(vllm, "7d", "nightly", 1, grouped=True)
    [row] = dash.matrix.rows
    assert (row.sha, row.runs, row.workflows) == (NIGHTLY_SHA, 2, 1)
    assert next(card for card in dash.cards if card.title == "Runs").value == "2"


@pytest.mark.parametrize("sha", ["", "not-a-sha", "3f1c2a9b"])
def test_it_refuses_a_pytorch_head_sha_that_is_not_40_hex_and_says_what_it_needs(vllm, report, sha):
    [body] = reporter_bodies(buildkite_build(3, sha, ["passed"]))
    response = report(body)
    assert response.status_code == 400 and "pytorch_head_sha" in response.json()["detail"]
    assert not JobRun.objects.exists()


def test_it_still_checks_the_sha_is_an_upstream_commit(vllm, report):
    [body] = reporter_bodies(buildkite_build(4, "a" * 40, ["passed"]))
    response = report(body)
    assert response.status_code == 400 and "is not a commit of the upstream repository" in response.json()["detail"]


def test_it_refuses_a_build_from_a_branch_the_pipeline_does_not_allow(vllm, report, oidc):
    [body] = reporter_bodies(buildkite_build(5, NIGHTLY_SHA, ["passed"]))
    fork = oidc.mint(kind="buildkite", organization_id=ORG, pipeline_id=PIPELINE, build_branch="contributor:patch-1")
    assert report(body, fork).status_code == 403


def test_the_existing_actions_nightly_shape_still_keys_by_its_sha(vllm, report):
    body = {
        "delivery_id": NIGHTLY_SHA.upper(),
        "event_type": "nightly",
        "payload": {"head_sha": NIGHTLY_SHA},
        "workflow": {
            "status": "completed",
            "conclusion": "success",
            "run_id": "88",
            "name": "nightly",
            "job_name": "build",
        },
    }
    assert report(body).status_code == 200
    assert JobRun.objects.get().delivery_key == NIGHTLY_SHA


def test_two_workflows_with_the_same_job_names_against_one_sha_keep_every_job_on_the_row(vllm, report, oidc):
    for number, slug in ((20, "ci"), (21, "ci-rocm")):
        for body in reporter_bodies(buildkite_build(number, NIGHTLY_SHA, ["passed", "failed"])):
            body["workflow"]["name"] = slug
            assert report(body).status_code == 200
    [row] = dashboard_build(vllm, "7d", "nightly", 1, grouped=True).matrix.rows
    assert (row.runs, row.workflows) == (2, 2)
    assert sorted(c.column.title for c in row.cells if c.verdicts) == sorted(
        f"{slug} / {label}" for slug in ("ci", "ci-rocm") for label in LABELS[:2]
    )


def test_a_nightly_cells_drill_down_finds_its_emoji_named_job(vllm, report, client):
    [body] = reporter_bodies(buildkite_build(30, NIGHTLY_SHA, ["failed"]))
    body["workflow"]["job_name"] = LABELS[1]
    assert report(body).status_code == 200
    detail = cell_detail(vllm, "nightly", NIGHTLY_SHA, f"ci / {LABELS[1]}", grouped=True)
    assert detail.members[0].label == f"ci / {LABELS[1]}" and detail.members[0].attempts[0].url.startswith(
        "https://buildkite.com/"
    )
    page = client.get("/crcr/vllm-project/vllm", {"event": "nightly", "cell": f"{NIGHTLY_SHA}:ci / {LABELS[1]}"})
    assert page.status_code == 200 and "Entrypoints Test (API Server): 🚀 :docker:" in page.content.decode()
