"""The sandbox's failure causes: what a backend's own failures are made of, so the HUD's causes
pages have something to cluster (relay/teststore/causes.py). Three kinds of cause meet in the sandbox:

- a missing operator on two backends: Apple MPS and Qualcomm's PrivateUse1 backend lack
  `aten::_linalg_eigvals`, each said in PyTorch's own words (MPS's "not currently implemented for
  the MPS device", the dispatcher's "Could not run … from the 'PrivateUse1' backend");
- the upstream assertion the reference shares: a commit that broke upstream fails the same pool
  tests with the same "Tensor-likes are not close!" on the reference and every backend
  (devtools/standin/sandbox.py: commit_fate);
- a backend's own numerical mismatch: Qualcomm's conv results off by more than the tolerance
  ("Scalars are not close!"), with numbers that differ per test and run but one reason.

Qualcomm's backend fails on its own often (sandbox.py: STRUGGLING_BACKENDS), so its causes cross
the issue threshold within minutes; the sandbox seed opts it in (devtools/sandbox_triage.py) and
the relay opens an issue in its repository on the stand-in. About five minutes in, Qualcomm fixes
its mismatch (`fix_step`): that issue, updated as the mismatch grew, closes once the mismatch has
stayed off trunk (the sandbox's cause issue day lasts two minutes: runstack's environment)."""

import random

EIGVALS = ("test_linalg.py", "TestLinalg{D}", "test_eigvals_{n}_{d}_complex64", "ACCELERATOR")
CONV = ("test_nn.py", "TestNNDevice{D}", "test_conv{n}d_same_padding_{d}_float32", "ACCELERATOR")
MISSING = {
    "pytorch-mps/mps-ci": "NotImplementedError: The operator 'aten::_linalg_eigvals' is not currently implemented "
    "for the MPS device. If you want this op to be considered for addition please comment on "
    "https://github.com/pytorch/pytorch/issues/141287 and mention use-case, that resulted in missing op as well "
    "as commit hash 2236df1770800ffea5697b11b0bb0d910b2e59e1.",
    "quic/ai-engine-direct-torch": "NotImplementedError: Could not run 'aten::_linalg_eigvals' with arguments from "
    "the 'PrivateUse1' backend. This could be because the operator doesn't exist for this backend, or was omitted "
    "during the selective/custom build process (if using custom build). 'aten::_linalg_eigvals' is only available "
    "for these backends: [CPU, CUDA, Meta, BackendSelect, Python, Named, Conjugate, Negative, ZeroTensor].",
}
MISMATCH = {"quic/ai-engine-direct-torch"}
FIXED: set[str] = set()
"""Backends that have fixed their numerical mismatch (the scenario, `fix_step`): from then on it
is off their trunk, and the issue it opened closes once it stayed off long enough."""
FIX_AT_STEP = 30
"""About five minutes into the sandbox (an upstream event every 6–15 s): the mismatch has crossed
its threshold and grown by then."""


def fix_step(steps: int) -> None:
    """The sandbox's scenario, once per upstream event: the mismatch fixed at FIX_AT_STEP."""
    if steps == FIX_AT_STEP:
        FIXED.update(MISMATCH)


def standing(repo: str) -> bool:
    """Whether the backend's own failures are its standing causes rather than a pool test."""
    return repo in MISSING or repo in MISMATCH


def failed(repo: str, shaped, rng: random.Random) -> list[dict]:
    """The backend's own failures on one run: its missing operator's tests (all of them: the
    operator is missing whatever the commit) and, now and then, its numerical mismatch."""
    tests = []
    if repo in MISSING:
        for n in range(1, 4):
            tests.append({**shaped(_spec(EIGVALS, n)), "message": MISSING[repo], "outcome": "error"})
    if repo in MISMATCH and repo not in FIXED and rng.random() < 0.6:
        for n in (1, 2):
            tests.append({**shaped(_spec(CONV, n)), "message": _mismatch(rng), "outcome": "failed"})
    return tests


def _spec(spec: tuple, n: int) -> tuple:
    file, cls, method, hw = spec
    return file, cls, method.replace("{n}", str(n)), hw


def _mismatch(rng: random.Random) -> str:
    """torch.testing's words for two scalars apart by more than the tolerance (the numbers vary)."""
    expected = round(rng.uniform(0.1, 4.0), 4)
    got = round(expected + rng.uniform(0.001, 0.01), 4)
    return (
        f"AssertionError: Scalars are not close!\n\nExpected {expected} but got {got}.\n"
        f"Absolute difference: {abs(got - expected):.4f} (up to 1e-05 allowed)\n"
        f"Relative difference: {abs(got - expected) / expected:.6f} (up to 1.3e-06 allowed)"
    )
