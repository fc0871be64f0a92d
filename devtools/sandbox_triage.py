"""Sandbox demo data for triage and notifications (sandbox mode only; `manage.py seed_sandbox`):
known issues over the stand-in's test pool (one matching by failure cause), an expectations file
for Apple MPS, Qualcomm's opt-in to issues for its failure causes, a mute AMD ROCm
put on the test it fails on its own (devtools/standin/sandbox.py: MUTED_TESTS), and one
subscription to the sandbox's local webhook sink, so marks and /notifications fill within
minutes. Idempotent: seeding again changes nothing."""

from relay.models import CauseIssuePolicy, KnownIssue, Project, Subscription
from relay.triage.expectations import expectations_replace
from relay.triage.issues import known_issue_create, known_issue_update
from relay.triage.mutes import MuteError, mute_create

SEED_BY = "sandbox seed"
ISSUES = [
    {
        "title": "Stream event sync is flaky on accelerators",
        "kind": "flaky",
        "test_patterns": ["TestStreams.test_stream_event_sync"],
        "url": "https://github.com/pytorch/pytorch/issues/170001",
    },
    {
        "title": "out= addmm mismatch on XPU",
        "kind": "product",
        "test_patterns": ["TestCommon.test_out_addmm*"],
        "url": "https://github.com/intel/torch-xpu-ops/issues/2101",
        "backends": ["intel/torch-xpu-ops"],
    },
    {
        "title": "svd_lowrank float64 tolerance (upstream)",
        "kind": "upstream",
        "test_patterns": ["test_linalg.TestLinalg.test_svd_lowrank*"],
        "url": "https://github.com/pytorch/pytorch/issues/170002",
        "blocks_gate": False,
    },
    {
        "title": "Storage resize regression",
        "kind": "upstream",
        "test_patterns": ["TestTorchDevice.test_storage_resize"],
        "url": "https://github.com/pytorch/pytorch/issues/170003",
        "state": "resolved",
    },
]
MUTES = [
    (
        "ROCm/pytorch",
        "test_binary_ufuncs.TestBinaryUfuncs.test_pow_scalar_overflow_int64",
        "int64 pow overflow differs on gfx942; fix in ROCm 7.1",
        "rocm-ci-oncall",
        # ROCm mutes only with a tracking issue (devtools/sandbox_registry.py: mute_needs_issue)
        "https://github.com/ROCm/pytorch/issues/2450",
    )
]
CAUSE_ISSUES_FOR = ("quic/ai-engine-direct-torch",)
"""Backends opted in to issues for their failure causes: Qualcomm's fails on its own often, so its
missing operator crosses the threshold within minutes (devtools/standin/causes_sim.py)."""
CAUSE_RULE_ISSUE = {
    "title": "aten::_linalg_eigvals missing on accelerators",
    "kind": "product",
    "cause": "NotImplementedError: aten::_linalg_eigvals",
    "url": "https://github.com/pytorch/pytorch/issues/141287",
}
"""A known issue that matches by cause (relay/teststore/causes.py): every backend's tests failing for the
missing operator read as known, whatever the test."""
MPS_EXPECTATIONS = """# Apple MPS: known gaps of the MPS backend (DRM-CI style: pattern,Kind)
TestBinaryUfuncs.test_pow_scalar_overflow_int64,Fail   # int64 pow overflows differently on MPS
TestAutogradDevice.test_pin_memory,Fail   # pinned memory is not supported on MPS
TestLinalg.test_svd_lowrank*,Flake
"""


def seed_sandbox_triage(sink_url: str = "") -> dict:
    specs = [*ISSUES, CAUSE_RULE_ISSUE]
    made = [_issue(spec) for spec in specs if not KnownIssue.objects.filter(title=spec["title"]).exists()]
    for project in Project.objects.filter(full_name__in=CAUSE_ISSUES_FOR):
        CauseIssuePolicy.objects.update_or_create(project=project, defaults={"enabled": True})
    mps = Project.objects.filter(full_name__iexact="pytorch-mps/mps-ci").first()
    if mps is not None and not mps.expectations.exists():
        expectations_replace(mps, MPS_EXPECTATIONS, by=SEED_BY)
    muted = [_mute(*spec) for spec in MUTES]
    if sink_url:
        Subscription.objects.update_or_create(
            name="Sandbox webhook sink",
            defaults={"channel": "webhook", "target": f"{sink_url}/hooks/crcr", "events": [], "active": True},
        )
        Subscription.objects.update_or_create(
            name="Sandbox Slack-style sink (Intel XPU)",
            defaults={
                "channel": "slack",
                "target": f"{sink_url}/hooks/slack",
                "project": Project.objects.filter(full_name="intel/torch-xpu-ops").first(),
                "events": ["new_failure", "recovery", "upstream_broken", "at_risk"],
                "active": True,
            },
        )
    return {"issues": len(made), "mutes": sum(muted)}


def _mute(repo: str, test_id: str, reason: str, owner: str, tracking_issue: str) -> bool:
    project = Project.objects.filter(full_name__iexact=repo).first()
    if project is None:
        return False
    try:
        mute_create(project, test_id, reason, owner, SEED_BY, days=30, tracking_issue=tracking_issue)
    except MuteError:
        return False  # muted already
    return True


def _issue(spec: dict) -> KnownIssue:
    spec = dict(spec)
    backends, state = spec.pop("backends", []), spec.pop("state", "open")
    projects = list(Project.objects.filter(full_name__in=backends))
    issue = known_issue_create(
        {**spec, "all_backends": not backends},
        by=SEED_BY,
        projects=projects,
        may_unblock=True,  # seeded as an admin
    )
    if state != "open":
        known_issue_update(issue, {"state": state})
    return issue
