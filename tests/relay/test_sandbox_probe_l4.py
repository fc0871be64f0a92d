"""The sandbox's simulated downstream CI: the probe repo's label-gated L4 check, merge runs through
the ciflow/trunk tag, and triage verdicts the relay reads as the action sends them."""

import random

from devtools.standin.sandbox import (
    NEVER_COMPLETES,
    PROBE_L4_LABEL,
    PROBE_L4_NAMINGS,
    PROBE_L4_WORKFLOW,
    JobPlan,
    Upstream,
)
from relay.callbacks.triage_verdict import triage_verdict_read
from relay.intake.deliveries import event_route, trunk_tag_pr
from relay.policy.verdicts import PROBE_EXPECTED

PROBE = {"full_name": "pytorch/crcr-test", "is_health_probe": True, "github_repo_id": 1}
BACKEND = {"full_name": "intel/torch-xpu-ops", "device": "xpu", "github_repo_id": 2}


def pr_payload(labels=(), number=170001, head="a" * 40) -> dict:
    pr = {"number": number, "head": {"sha": head}, "labels": [{"name": n} for n in labels]}
    return {"event_type": "pull_request", "delivery_id": "d", "payload": {"pull_request": pr}}


def test_the_probe_runs_its_l4_check_only_on_a_pr_labelled_for_it():
    plain = [j["name"] for j in JobPlan(PROBE, pr_payload()).jobs()]
    labelled = JobPlan(PROBE, pr_payload([PROBE_L4_LABEL], number=170002)).jobs()
    assert plain == ["smoke", "xfail", "xcancel", "xtimeout"]
    assert [j["name"] for j in labelled] == plain + [name for name, _ in PROBE_L4_NAMINGS["expected"]]
    assert {j.get("workflow") for j in labelled[4:]} == {PROBE_L4_WORKFLOW}
    assert [j["name"] for j in labelled if "matrix" in j["name"]] == [
        "test-L4-matrix-checkrun-creation-1",
        "test-L4-matrix-checkrun-creation-2",
        "test-L4-matrix-checkrun-creation-3",
    ]


def test_one_pr_in_eight_runs_the_plain_naming_whose_failures_are_real():
    jobs = JobPlan(PROBE, pr_payload([PROBE_L4_LABEL], number=170003)).jobs()[4:]
    assert [j["name"] for j in jobs][:4] == ["test-L4-success", "test-L4-failure", "test-L4-cancel", "test-L4-timeout"]
    assert all(marker not in j["name"] for j in jobs for marker in PROBE_EXPECTED)


def test_each_expected_l4_probe_job_ends_as_its_name_says_it_is_built_to():
    for name, conclusion in PROBE_L4_NAMINGS["expected"]:
        marker = next((m for m in PROBE_EXPECTED if m in name), None)
        ends = "timed_out" if conclusion == NEVER_COMPLETES else conclusion
        assert ends == (PROBE_EXPECTED[marker] if marker else "success"), name


def test_the_timeout_job_reports_in_progress_and_never_completes_in_both_namings():
    for number in (170002, 170003):
        jobs = JobPlan(PROBE, pr_payload([PROBE_L4_LABEL], number=number)).jobs()[4:]
        assert [j["name"] for j in jobs if j["hangs"]] in (["test-L4-xtimeout"], ["test-L4-timeout"])
        assert not any(j["never_starts"] for j in jobs)


class Recorder(Upstream):
    def __init__(self):
        self.sent, self.rng = [], random.Random(1)

    def send(self, event, payload):
        self.sent.append((event, payload))


def test_a_sandbox_merge_run_is_a_ciflow_trunk_tag_push_the_relay_maps_to_its_pr():
    upstream = Recorder()
    pull = type("Pull", (), {"number": 170007, "head": "c" * 40, "title": "Fix"})()
    upstream.merge_run(pull)
    [(event, payload)] = upstream.sent
    assert event == "push" and trunk_tag_pr(payload) == 170007 and payload["after"] == "c" * 40
    assert event_route(event, payload).dispatches


def test_every_sandbox_triage_verdict_is_kept_by_the_relay_except_the_deliberately_hostile_ones():
    kept = dropped = 0
    for i in range(300):
        plan = JobPlan(BACKEND, pr_payload(head=f"{i:040x}"))
        for job in plan.jobs():
            if not job["failed_tests"]:
                continue
            verdict, why = triage_verdict_read(plan.triage_verdict(job))
            if verdict is None:
                assert "log_url" in why
                dropped += 1
                continue
            kept += 1
            if verdict["category"] == "upstream":
                assert verdict["suspected_upstream"]["pr"] == 170001
    assert kept > 100 and 0 < dropped < kept / 4
