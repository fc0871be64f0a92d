"""The registry sandbox mode starts with (`manage.py seed_sandbox`, run by `make run` without App
credentials): demo data, so it lives with the development tools, written through the product's
own registry services so every level is audited like any other."""

from django.db import transaction

from relay.models import CIProvider, HardwareKind, Project
from relay.registry.service import project_create, project_update

SANDBOX_SEED_BY = "sandbox-seed"
REASON = "sandbox registry"

# The registry sandbox mode starts with: the seven mission systems, Ascend (upstream's first L3
# backend, a PrivateUse1 device named npu), the OpenReg reference backend,
# the relay's own health probe, and a nightly-only repo (allowlist `events: [nightly]`); vLLM also
# reports nightlies through its Buildkite reporter; torch-spyre, a runner wrapping upstream's modules
# in generated files (issue 53). Repo ids are made up but stable, so reseeding finds the same rows.
SANDBOX_BUILDKITE_ORG = "018b5ec5-5a2e-4b8c-9d61-0c3f1a7e2b10"
SANDBOX_BUILDKITE_PIPELINE = "018cdabc-7f41-4e0d-8a93-6b2d5c1e9f20"
SANDBOX_PROJECTS = (
    {
        "full_name": "pytorch/openreg-ci",
        "level": "L2",
        "display_name": "OpenReg (reference)",
        "github_repo_id": 700000001,
        "hardware_kind": HardwareKind.REFERENCE,
        "is_reference": True,
        "oncalls": ["openreg-maintainer"],
    },
    {
        "full_name": "intel/torch-xpu-ops",
        "level": "L4",
        "display_name": "Intel XPU",
        "github_repo_id": 700000002,
        "hardware_kind": HardwareKind.GPU,
        "oncalls": ["xpu-oncall", "intel-pt-ci"],
    },
    {
        "full_name": "ROCm/pytorch",
        "level": "L3",
        "device": "rocm",
        "display_name": "AMD ROCm",
        "github_repo_id": 700000003,
        "hardware_kind": HardwareKind.GPU,
        "oncalls": ["rocm-ci-oncall"],
        "variant_keys": ["device"],  # MI300 and MI250 from one repo (the sandbox's VARIANTS)
        "mute_needs_issue": True,  # as Intel's XPU team asks of every skip: each mute links its tracking issue
    },
    {
        "full_name": "pytorch-mps/mps-ci",
        "level": "L2",
        "display_name": "Apple MPS",
        "github_repo_id": 700000004,
        "hardware_kind": HardwareKind.GPU,
        "oncalls": ["mps-oncall"],
    },
    {
        "full_name": "Ascend/pytorch",
        "level": "L3",
        "device": "npu",
        "device_type": "npu",
        "display_name": "Ascend NPU",
        "github_repo_id": 700000011,
        "hardware_kind": HardwareKind.NPU,
        "oncalls": ["ascend-ci-oncall"],
        # Its simulated CI answers bisection probes (devtools/standin/sandbox.py), so the sandbox
        # shows a verified culprit, a not reproducible one, and a shared failure left alone.
        "bisect_enabled": True,
        "bisect_event_type": "crcr-bisect",
    },
    {
        "full_name": "quic/ai-engine-direct-torch",
        "level": "L3",
        "device": "qnn",
        "display_name": "Qualcomm AI Engine",
        "github_repo_id": 700000005,
        "hardware_kind": HardwareKind.NPU,
        "oncalls": ["qnn-oncall"],
    },
    {
        "full_name": "vllm-project/vllm",
        "level": "L2",
        "display_name": "vLLM",
        "github_repo_id": 700000006,
        "hardware_kind": HardwareKind.ECOSYSTEM,
        "ci_provider": CIProvider.BUILDKITE,
        "oncalls": ["vllm-ci"],
        "buildkite_pipeline": f"{SANDBOX_BUILDKITE_ORG}/{SANDBOX_BUILDKITE_PIPELINE}",
        "oidc_required_claims": {"build_branch": ["main", "nightly"]},
    },
    {
        "full_name": "sgl-project/sglang",
        "level": "L1",
        "display_name": "SGLang",
        "github_repo_id": 700000007,
        "hardware_kind": HardwareKind.ECOSYSTEM,
        "oncalls": [],
    },
    {
        "full_name": "huggingface/transformers",
        "level": "L2",
        "display_name": "Hugging Face Transformers",
        "github_repo_id": 700000008,
        "hardware_kind": HardwareKind.ECOSYSTEM,
        "oncalls": ["hf-ci-oncall"],
    },
    {
        "full_name": "pytorch/crcr-test",
        "level": "L4",  # its label-gated L4 check (ciflow/crcr/crcr-test-L4) writes check runs and counts in the gate
        "display_name": "CRCR health probe",
        "github_repo_id": 700000009,
        "hardware_kind": HardwareKind.PROBE,
        "is_health_probe": True,
        "oncalls": [],
    },
    {
        "full_name": "TorchedHat/pytorch-redhat-ci",
        "level": "L2",
        "display_name": "Red Hat (nightly)",
        "github_repo_id": 700000010,
        "hardware_kind": HardwareKind.CPU,
        "oncalls": ["redhat-ci"],
        "events": ["nightly"],
        "bisect_enabled": True,  # its nightlies span many commits: bisection narrows them to one
    },
    {
        # A wrapper-style runner: it runs upstream's modules through generated <stem>__oot_wrapper.py
        # files (the sandbox's PRODUCERS), and PrivateUse1 is renamed `spyre`.
        "full_name": "torch-spyre/torch-spyre",
        "level": "L2",
        "device_type": "spyre",
        "display_name": "IBM Spyre",
        "github_repo_id": 700000012,
        "hardware_kind": HardwareKind.NPU,
        "oncalls": ["spyre-ci"],
    },
)


@transaction.atomic
def seed_sandbox_registry() -> list[Project]:
    """Upsert the sandbox registry; running it again changes nothing."""
    positions: dict[str, int] = {}
    return [_seed_one(spec, positions) for spec in SANDBOX_PROJECTS]


def _seed_one(spec: dict, positions: dict[str, int]) -> Project:
    fields = {"active": True, **spec}
    full_name, level, device = fields.pop("full_name"), fields.pop("level"), fields.pop("device", "")
    fields["position"] = positions[level] = positions.get(level, -1) + 1
    project = Project.objects.filter(full_name__iexact=full_name).first()
    if project is None:
        return project_create(full_name, level, by=SANDBOX_SEED_BY, reason=REASON, device=device, **fields)
    project_update(project, {**fields, "level": level, "device": device}, by=SANDBOX_SEED_BY, reason=REASON)
    return project
