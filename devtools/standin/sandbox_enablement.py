"""The sandbox's enablement (issue 53): a slice of PyTorch's suite spread over the integration
paths, which the OpenReg reference passes in full (cases in its JUnit report, so the reference
import counts them per module) and each backend runs as far as it has come:

- Intel XPU far along eager ops and nn, compile barely started;
- Ascend with the profiler path (Kineto through REGISTER_PRIVATEUSE1_PROFILER) and distributed on;
- ROCm answering the lasting upstream break (the sandbox's LASTING_BREAK, a test_nn test) by
  skipping most of test_nn from that commit on: "skipped +N since <sha>" on its page;
- MPS and Qualcomm early on; the ecosystem repos (vLLM, SGLang, Transformers) run their own
  suites, not upstream's, and send no module counts.

A backend's counts go on its test shards (each shard its half of the modules), as our client
sends them from JUnit: `workflow.module_counts` keyed by the module's file."""

SUITE = {
    "test_ops": 120,
    "test_torch": 60,
    "test_binary_ufuncs": 40,
    "test_autograd": 50,
    "test_nn": 60,
    "nn.test_convolution": 30,
    "test_linalg": 40,
    "test_sparse": 25,
    "profiler.test_profiler": 15,
    "distributed.test_c10d_common": 20,
    "dynamo.test_repros": 30,
    "inductor.test_torchinductor": 40,
    "export.test_export": 20,
    "test_openreg": 10,
}
"""Module → how many of its tests the sandbox runs (the identity rule's module names)."""

PATH_OF = {
    "test_ops": "eager ops",
    "test_torch": "eager ops",
    "test_binary_ufuncs": "eager ops",
    "test_autograd": "autograd",
    "test_nn": "nn",
    "nn.test_convolution": "nn",
    "test_linalg": "linalg",
    "test_sparse": "sparse",
    "profiler.test_profiler": "profiler",
    "distributed.test_c10d_common": "distributed",
    "dynamo.test_repros": "compile/dynamo",
    "inductor.test_torchinductor": "compile/inductor",
    "export.test_export": "export",
    "test_openreg": "eager ops",
}
"""What the shipped rules (relay/enablement/paths.yml) say of each: the sandbox's own plan."""

STAGES = {
    "intel/torch-xpu-ops": {
        "eager ops": 0.95,
        "autograd": 0.9,
        "nn": 0.9,
        "linalg": 0.8,
        "sparse": 0.4,
        "profiler": 0.2,
        "distributed": 0.1,
        "compile/dynamo": 0.1,
        "compile/inductor": 0.05,
    },
    "Ascend/pytorch": {
        "eager ops": 0.9,
        "autograd": 0.85,
        "nn": 0.8,
        "linalg": 0.6,
        "sparse": 0.3,
        "profiler": 1.0,
        "distributed": 0.8,
        "compile/dynamo": 0.3,
    },
    "ROCm/pytorch": {
        "eager ops": 0.97,
        "autograd": 0.95,
        "nn": 0.95,
        "linalg": 0.9,
        "sparse": 0.7,
        "profiler": 0.6,
        "distributed": 0.8,
        "compile/dynamo": 0.7,
        "compile/inductor": 0.6,
        "export": 0.5,
    },
    "pytorch-mps/mps-ci": {"eager ops": 0.7, "autograd": 0.6, "nn": 0.6, "linalg": 0.3},
    "quic/ai-engine-direct-torch": {"eager ops": 0.3, "nn": 0.1},
}
"""Per backend, the share of each path's tests it runs and passes (the rest it skips)."""

SKIPS_AFTER_BREAK = {"ROCm/pytorch": ("test_nn", 0.7)}
"""Backends that answer the lasting upstream break by skipping this share of a module's tests."""


def reference_cases(device_class: str, device: str) -> list[str]:
    """The reference's passing testcases of the suite, as PyTorch's CI writes them from inside
    test/ (`nn.test_convolution.TestConvolutionPRIVATEUSE1`, file `nn/test_convolution.py`)."""
    cases = []
    for module, count in SUITE.items():
        cls = "Test" + module.rpartition(".")[2].removeprefix("test_").title().replace("_", "") + device_class
        file = module.replace(".", "/") + ".py"
        cases += [
            f'<testcase classname="{module}.{cls}" name="test_case_{i}_{device}" file="{file}" time="0.01"/>'
            for i in range(count)
        ]
    return cases


def module_counts(full_name: str, shard: int, shards: int, failed: list[dict], after_break: bool) -> dict:
    """A test shard's `workflow.module_counts`: its modules (every `shards`-th from `shard`), each
    passed as far as the backend has come, the rest skipped, its failed tests' files failing."""
    stage = STAGES.get(full_name)
    if stage is None:
        return {}
    counts = {}
    for module in list(SUITE)[shard - 1 :: shards]:
        count, share = SUITE[module], stage.get(PATH_OF[module], 0.0)
        skip_module, skip_share = SKIPS_AFTER_BREAK.get(full_name, ("", 0.0))
        if after_break and module == skip_module:
            share *= 1 - skip_share
        failing = min(count, sum(1 for test in failed if failed_module(test) == module))
        passed = max(0, int(count * share) - failing)
        counts[f"test/{module.replace('.', '/')}.py"] = {
            "passed": passed,
            "failed": failing,
            "skipped": count - passed - failing,
        }
    return counts


def failed_module(test: dict) -> str:
    """The module of one failed test as the sandbox's producers shape it (report_shape): its
    file, a node id's path, or a classname's dotted prefix."""
    name, classname = test.get("name", ""), test.get("classname", "")
    path = test.get("file") or (name.partition("::")[0] if "::" in name else classname.rpartition(".")[0])
    return path.removeprefix("test/").removeprefix("test.").removesuffix(".py").replace("/", ".")
