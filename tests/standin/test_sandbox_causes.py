"""The sandbox's failures come through a few causes (devtools/standin/causes_sim.py): a missing
operator on two backends in PyTorch's own words, the upstream assertion the reference shares,
and one backend's own numerical mismatch."""

import random

from devtools.standin.sandbox import JobPlan, reference_junit
from relay.policy.reasons import MISSING_OPERATOR, reason_of
from relay.reference.junit import junit_parse

QNN, MPS, XPU = "quic/ai-engine-direct-torch", "pytorch-mps/mps-ci", "intel/torch-xpu-ops"


def shas(broken: bool):
    for n in range(2000):
        sha = f"{n:040x}"
        if JobPlan({"full_name": "x"}, {"payload": {"after": sha}}).upstream_broken == broken:
            yield sha


def own_failures(repo: str, sha: str, seed: int = 7) -> list[dict]:
    """The backend's own failures on a commit upstream did not break (its random draws seeded:
    the plan seeds them from the clock)."""
    plan = JobPlan({"full_name": repo, "level": "L2"}, {"payload": {"after": sha}})
    plan.rng = random.Random(seed)
    return plan.failed_tests()


def reasons(tests: list[dict]) -> set:
    return {reason_of(t["message"], t.get("stacktrace", "")) for t in tests}


def test_two_backends_miss_one_operator_said_in_their_own_words():
    sha = next(shas(broken=False))
    qnn = {r for r in reasons(own_failures(QNN, sha)) if r.kind == MISSING_OPERATOR}
    mps = {r for r in reasons(own_failures(MPS, sha)) if r.kind == MISSING_OPERATOR}
    assert {r.digest for r in qnn} == {r.digest for r in mps} and len(qnn) == 1
    assert next(iter(qnn)).operator == "aten::_linalg_eigvals"
    assert {r.device for r in qnn} | {r.device for r in mps} == {"PrivateUse1", "MPS"}


def test_the_backends_own_mismatch_is_one_cause_whatever_its_numbers():
    mismatches = set()
    for seed, sha in enumerate(list(shas(broken=False))[:12]):
        mismatches |= {r.digest for r in reasons(own_failures(QNN, sha, seed)) if r.exception == "AssertionError"}
    assert len(mismatches) == 1


def test_an_upstream_break_reads_as_the_reference_s_own_assertion():
    sha = next(shas(broken=True))
    reference = {reason_of(t.message).digest for t in junit_parse(reference_junit(sha)).failed_tests}
    backend = JobPlan({"full_name": XPU, "level": "L2"}, {"payload": {"after": sha}}).failed_tests()
    assert reference and reference <= {r.digest for r in reasons(backend)}


def test_the_scenario_fixes_the_mismatch_so_its_issue_can_close(monkeypatch):
    from devtools.standin import causes_sim

    monkeypatch.setattr(causes_sim, "FIXED", set())
    shas_ = list(shas(broken=False))[:12]

    def mismatches() -> int:
        return sum(
            r.exception == "AssertionError" for n, sha in enumerate(shas_) for r in reasons(own_failures(QNN, sha, n))
        )

    assert mismatches() > 0
    causes_sim.fix_step(causes_sim.FIX_AT_STEP - 1)
    assert mismatches() > 0, "not yet"
    causes_sim.fix_step(causes_sim.FIX_AT_STEP)
    assert mismatches() == 0
    assert any(r.kind == MISSING_OPERATOR for r in reasons(own_failures(QNN, shas_[0]))), "the operator still missing"
