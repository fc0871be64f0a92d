"""The sandbox's bisection world: an injected backend-only failure fails every run of its backend
on a descendant commit (a dispatch, a nightly, a probe) and no other; the probe workflow runs only
the tests asked about; the flaky injection passes its culprit re-run."""

import pytest

from devtools.standin import bisect_sim
from devtools.standin.sandbox import BISECT_FLAKY, BISECT_NIGHTLY, BISECT_PUSH, JobPlan, Nightlies, shaped_test
from relay.policy.testids import report_ids

ASCEND = {"full_name": "Ascend/pytorch", "level": "L3"}
REDHAT = {"full_name": "TorchedHat/pytorch-redhat-ci", "level": "L2", "events": ["nightly"]}


@pytest.fixture(autouse=True)
def world(monkeypatch):
    monkeypatch.setattr(bisect_sim, "TRUNK_INDEX", {})
    monkeypatch.setattr(bisect_sim, "BASE_OF", {})
    monkeypatch.setattr(bisect_sim, "INJECTIONS", [])
    shas = [f"{n:040x}" for n in range(1, 9)]
    for sha in shas:
        bisect_sim.trunk_record(sha)
    bisect_sim.head_record("f" * 40, shas[5])
    return shas


def probe(sha: str, role: str = "search") -> dict:
    tests = [{"test_id": "test_ops.TestBisect.test_index_put_accumulate_float32", "job": "crcr / test (default, 1, 2)"}]
    return {
        "event_type": "bisect",
        "delivery_id": "bisect-1-1",
        "payload": {"head_sha": sha, "after": sha},
        "bisect": {
            "id": 1,
            "probe": 1,
            "role": role,
            "sha": sha,
            "tests": tests,
            "jobs": ["crcr / test (default, 1, 2)"],
        },
    }


def test_a_commit_descends_from_the_trunk_commits_before_it_and_a_pr_head_from_its_base(world):
    assert bisect_sim.descends(world[4], world[2]) and not bisect_sim.descends(world[1], world[2])
    assert bisect_sim.descends("f" * 40, world[5]) and not bisect_sim.descends("f" * 40, world[6])


def test_every_run_of_the_backend_from_the_culprit_on_fails_the_injected_test_and_only_there(world):
    bisect_sim.inject(BISECT_PUSH[0], world[3], BISECT_PUSH[1])
    failing = JobPlan(ASCEND, {"payload": {"after": world[5]}}).jobs()[1]
    assert failing["conclusion"] == "failure" and not failing["flaky"]
    assert any("index_put_accumulate_npu" in t["name"] for t in failing["failed_tests"])
    before = JobPlan(ASCEND, {"payload": {"after": world[2]}}).jobs()[1]
    assert not any("index_put" in t["name"] for t in before["failed_tests"])
    assert bisect_sim.injected("intel/torch-xpu-ops", world[5]) == []


def test_the_probe_workflow_runs_only_the_tests_asked_about_and_fails_them_from_the_culprit_on(world):
    bisect_sim.inject(BISECT_PUSH[0], world[3], BISECT_PUSH[1])
    shaped = lambda spec: shaped_test(ASCEND, spec)  # noqa: E731
    (after,) = bisect_sim.probe_jobs(ASCEND, probe(world[4]), shaped)
    (before,) = bisect_sim.probe_jobs(ASCEND, probe(world[2]), shaped)
    assert (after["conclusion"], after["test_results"]) == ("failure", {"passed": 0, "failed": 1, "skipped": 0})
    assert (before["conclusion"], before["failed_tests"]) == ("success", [])
    ids = report_ids(after["failed_tests"], "npu", {"device": "npu"})
    assert [tid.full for tid in ids] == ["test_ops.TestBisect.test_index_put_accumulate_float32"]


def test_the_flaky_injection_passes_its_culprit_re_run(world):
    bisect_sim.inject(BISECT_FLAKY[0], world[3], BISECT_FLAKY[1], flaky=True)
    assert bisect_sim.injected(BISECT_FLAKY[0], world[3], role="search")
    assert bisect_sim.injected(BISECT_FLAKY[0], world[3], role="culprit") == []


def test_a_nightly_reports_per_test_results_and_the_injected_failure_on_its_first_shard(world):
    bisect_sim.inject(BISECT_NIGHTLY[0], world[3], BISECT_NIGHTLY[1])
    nightlies = Nightlies(runners=None, projects=[REDHAT])
    failing = nightlies.tests_of(REDHAT, world[6], "test (cpu, 1, 2)")
    assert failing["test_results"]["failed"] == 1 and "layer_norm_eps" in failing["failed_tests"][0]["name"]
    assert nightlies.tests_of(REDHAT, world[1], "test (cpu, 1, 2)")["failed_tests"] == []
    assert nightlies.tests_of(REDHAT, world[6], "build") is None
