"""One identity for every device on the real producers' reports (tests/fixtures/pytorch-reports,
made by devtools/pytorch_reports/make_fixtures.py with PyTorch's own instantiate_device_type_tests),
and over every name PyTorch's naming rule can make (properties)."""

from pathlib import Path

import pytest
from defusedxml import ElementTree
from hypothesis import given
from hypothesis import strategies as st

from relay.policy.testids import _DTYPE_TOKEN, DEVICES, TestId, device_words, report_ids, test_id
from relay.policy.torch_device_types import DEVICE_TYPES as TORCH_DEVICE_TYPES

REPORTS = Path(__file__).parents[2] / "fixtures" / "pytorch-reports"
PRIVATEUSE1_NAMES = ("openreg", "npu", "spyre", "rbln")
DEVICE_TYPES = ("xpu", "cuda", "mps", "cpu")
SHAPES = ("pytest-test-dir.xml", "pytest-root.xml", "unittest")
UPSTREAM_TESTS = {
    "TestDeviceGeneric." + method
    for method in (
        "test_add_float32",
        "test_add_int64",
        "test_binary_op_add_float32",
        "test_binary_op_sub_float32",
        "test_mul_overflow_float32",
        "test_to_cuda",
        "test_npu_format_cast",
        "test_index_error",
        "test_needs_two_devices",
        "test_known_broken",
        "test_fixed_upstream",
    )
}


def cases(device: str, shape: str) -> list[dict]:
    path = REPORTS / device / shape
    files = sorted(path.glob("*.xml")) if path.is_dir() else [path]
    return [
        {"name": case.get("name"), "classname": case.get("classname") or "", "file": case.get("file") or ""}
        for file in files
        for case in ElementTree.parse(file).getroot().iter("testcase")
    ]


def device_ids(device: str, shape: str, device_type: str = "", env_device: str = "") -> set[TestId]:
    """The identities of the backend's own instantiation in its whole report (which holds the
    CPU twins too, except for a CPU backend's)."""
    tests = [t for t in cases(device, shape) if "TestDeviceGeneric" in t["classname"]]
    ids = report_ids(tests, device_type, {"device": env_device})
    return {tid for t, tid in zip(tests, ids) if device == "cpu" or "CPU" not in t["classname"]}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("device", PRIVATEUSE1_NAMES + DEVICE_TYPES)
def test_every_backend_s_instantiation_is_the_upstream_test(device, shape):
    assert device_ids(device, shape) == {TestId("test_device_generic", key) for key in UPSTREAM_TESTS}


@pytest.mark.parametrize("device", PRIVATEUSE1_NAMES)
def test_a_privateuse1_report_reads_the_same_with_or_without_hints(device):
    for shape in SHAPES:
        assert device_ids(device, shape, device_type=device) == device_ids(device, shape)
        assert device_ids(device, shape, env_device=device) == device_ids(device, shape)
        assert device_ids(device, shape, env_device="npu") == device_ids(device, shape)


def test_the_reports_really_carry_each_backend_s_own_name():
    """What the identity must undo, as PyTorch wrote it: class by device type, method by name."""
    names = {t["name"] for t in cases("npu", "pytest-test-dir.xml")}
    assert {"test_add_npu_float32", "test_npu_format_cast_npu", "test_to_cuda_npu"} <= names
    classes = {t["classname"] for t in cases("spyre", "unittest")}
    assert classes == {"TestDeviceGenericCPU", "TestDeviceGenericPRIVATEUSE1"}
    assert "test_to_cuda_cuda" in {t["name"] for t in cases("cuda", "pytest-root.xml")}


def test_the_cpu_twins_in_an_accelerator_s_report_stay_their_own_tests():
    tests = cases("openreg", "pytest-test-dir.xml")
    cpu = {tid.key for t, tid in zip(tests, report_ids(tests)) if t["classname"].endswith("CPU")}
    assert "TestDeviceGenericCPU.test_add_cpu_float32" in cpu
    assert not cpu & UPSTREAM_TESTS


def test_a_cpu_backend_s_report_reads_as_the_reference_s_tests():
    """The RISC-V case: a CPU-architecture CI's failures compare with OpenReg's."""
    assert device_ids("cpu", "pytest-test-dir.xml") == device_ids("openreg", "pytest-test-dir.xml")


def test_pytest_bracket_ids_are_parameters_and_stay():
    tests = [t for t in cases("npu", "pytest-test-dir.xml") if t["name"].startswith("test_op_on[")]
    assert {tid.full for tid in report_ids(tests)} == {
        f"test_pytest_outcomes.test_op_on[{op}-{device}]" for op in ("add", "matmul") for device in ("cpu", "npu")
    }


# --- the word in the device's position -----------------------------------------------------------


def test_a_word_learned_from_the_class_covers_a_method_of_an_odd_shape():
    """torch_npu's own hifloat8 dtype is no torch dtype: alone, `hifloat8` would look like the
    device; the class's other methods say the device is npu."""
    tests = [
        {"name": f"test_{op}_npu_{dtype}", "classname": "TestFooPRIVATEUSE1"}
        for op, dtype in (("add", "float32"), ("mul", "float16"), ("cast", "hifloat8"))
    ]
    assert [tid.key for tid in report_ids(tests)] == [
        "TestFoo.test_add_float32",
        "TestFoo.test_mul_float16",
        "TestFoo.test_cast_hifloat8",
    ]
    assert test_id(**tests[2]).key == "TestFoo.test_cast_npu"  # what one method alone reads


def test_a_registry_device_type_is_known_wherever_it_last_stands():
    assert test_id("test_cast_npu_hifloat8", "TestFooPRIVATEUSE1", devices=("npu",)).key == "TestFoo.test_cast_hifloat8"


def test_an_environment_hint_counts_only_in_the_device_s_position():
    """`environment.device` may be a product word that upstream names use too."""
    assert test_id("test_gpu_sync_npu", "TestFooPRIVATEUSE1", hints=("gpu",)).key == "TestFoo.test_gpu_sync"
    assert test_id("test_matmul_gpu", "test_ops", "test_ops.py", hints=("gpu",)).key == "test_matmul"
    assert test_id("test_gpu_matmul", "test_ops", "test_ops.py", hints=("gpu",)).key == "test_gpu_matmul"


def test_a_registry_device_type_names_its_class_suffix_and_its_function_tests():
    assert test_id("test_add_npu_float32", "TestFooNPU", devices=("npu",)).key == "TestFoo.test_add_float32"
    assert test_id("test_add_npu_float32", "TestFooNPU").key == "TestFooNPU.test_add_npu_float32"
    assert test_id("test_matmul_npu", "test_ops", "test_ops.py", devices=("npu",)).key == "test_matmul"


def test_only_plain_device_words_are_hints():
    assert device_words("NPU", " spyre ", "cpu", "Intel Max 1550", "", None, "npu") == ("npu", "spyre", "cpu")
    assert report_ids([{"name": "test_x_npu", "classname": "TestFooPRIVATEUSE1"}], "", "not a mapping")


# --- properties over PyTorch's naming rule -------------------------------------------------------

DTYPES = ("float32", "float64", "bfloat16", "int64", "uint8", "bool", "complex64", "float8_e4m3fn")
WORDS = ("add", "conv2d", "to", "cuda", "npu", "xpu", "openreg", "mps", "spyre", "copy", "float32", "grad")
word = st.sampled_from(WORDS) | st.from_regex(r"[a-z]{1,8}", fullmatch=True)
backend_name = st.from_regex(r"[a-z]{2,8}", fullmatch=True).filter(
    lambda w: (
        w not in {"cpu", "meta"} and not _DTYPE_TOKEN.fullmatch(w)
    )  # a device named like a dtype needs device_type
)
device = st.tuples(st.just("PRIVATEUSE1"), backend_name) | st.sampled_from(
    [("CUDA", "cuda"), ("XPU", "xpu"), ("MPS", "mps"), ("PRIVATEUSE1", "openreg"), ("PRIVATEUSE1", "privateuse1")]
)
shape = st.sampled_from(["bare", "module", "root", "nodeid", "dotted"])


def reported(cls: str, method: str, how: str) -> dict:
    return {
        "bare": {"name": method, "classname": cls, "file": "test/test_x.py"},
        "module": {"name": method, "classname": f"test_x.{cls}", "file": "test_x.py"},
        "root": {"name": method, "classname": f"test.test_x.{cls}"},
        "nodeid": {"name": f"test/test_x.py::{cls}::{method}"},
        "dotted": {"name": f"test_x.{cls}.{method}"},
    }[how]


@given(
    name=st.lists(word, min_size=1, max_size=4),
    params=st.lists(word, max_size=2),
    dtypes=st.lists(st.sampled_from(DTYPES), max_size=2),
    device=device,
    how=shape,
    told=st.sampled_from(["nothing", "device_type", "environment", "a wrong environment"]),
)
def test_any_instantiated_name_reads_as_the_upstream_test(name, params, dtypes, device, how, told):
    """`{name}{parametrize}_{device}{dtypes}` on class `Test…{TYPE}`: whatever words the
    upstream name holds (device words too), only the spliced-in device goes."""
    suffix, backend = device
    upstream, rest = "test_" + "_".join(name), "".join(f"_{p}" for p in params + dtypes)
    method = f"test_{'_'.join(name)}{''.join('_' + p for p in params)}_{backend}{''.join('_' + d for d in dtypes)}"
    known = device_words(backend) if told == "device_type" else ()
    hints = device_words(backend if told == "environment" else name[0] if told != "nothing" else "")
    tid = test_id(**reported(f"TestThing{suffix}", method, how), devices=known, hints=hints)
    assert tid == TestId("test_x", f"TestThing.{upstream}{rest}")


@given(methods=st.lists(st.lists(word, min_size=1, max_size=3), min_size=1, max_size=5), backend=backend_name)
def test_a_class_s_report_reads_as_its_upstream_tests(methods, backend):
    tests = [{"name": f"test_{'_'.join(m)}_{backend}_float32", "classname": "TestThingPRIVATEUSE1"} for m in methods]
    assert [t.key for t in report_ids(tests)] == [f"TestThing.test_{'_'.join(m)}_float32" for m in methods]


# --- every device type PyTorch knows -------------------------------------------------------------

OWN_NAMES = st.from_regex(r"[a-z]{2,8}", fullmatch=True).filter(
    lambda w: w not in DEVICES and not _DTYPE_TOKEN.fullmatch(w)
)
"""A PrivateUse1 backend's registered name (not a device type's: that would be the type)."""
EVERY_DEVICE = st.sampled_from(
    [(d.upper(), d) for d in TORCH_DEVICE_TYPES if d != "privateuse1"] + [("PRIVATEUSE1", "privateuse1")]
) | OWN_NAMES.flatmap(lambda name: st.sampled_from([("PRIVATEUSE1", name), (name.upper(), name)]))
"""Every c10 DeviceType as instantiate_device_type_tests suffixes it, and a PrivateUse1
backend's own name under both class forms (`TestFooPRIVATEUSE1`, `TestFooNPU`)."""


@pytest.mark.parametrize("device_type", TORCH_DEVICE_TYPES)
def test_every_torch_device_type_is_a_device_word(device_type):
    method = f"test_add_{device_type}_float32"
    assert test_id(method, f"TestFoo{device_type.upper()}").key == "TestFoo.test_add_float32"
    assert test_id(method).key == "test_add_float32"  # a function test: the word in the device's position


@given(
    name=st.lists(word, min_size=1, max_size=4),
    dtypes=st.lists(st.sampled_from(DTYPES), max_size=2),
    device=EVERY_DEVICE,
    how=shape,
    methods=st.integers(min_value=1, max_value=4),
)
def test_a_report_from_any_device_type_reads_as_the_reference_s(name, dtypes, device, how, methods):
    """The same upstream tests instantiated for any device PyTorch knows and for OpenReg (the
    reference, PRIVATEUSE1 named openreg) get the same identities, whoever reports them."""
    suffix, backend = device
    upstream = [f"test_{'_'.join(name)}_{i}" for i in range(methods)]
    tail = "".join(f"_{d}" for d in dtypes)

    def report(cls_suffix, dev):
        return [reported(f"TestThing{cls_suffix}", f"{u}_{dev}{tail}", how) for u in upstream]

    theirs = report_ids(report(suffix, backend))
    reference = report_ids(report("PRIVATEUSE1", "openreg"))
    assert theirs == reference == [TestId("test_x", f"TestThing.{u}{tail}") for u in upstream]


@given(device=st.sampled_from([d for d in TORCH_DEVICE_TYPES if d not in ("cpu", "meta")]))
def test_the_cpu_and_meta_twins_of_any_accelerator_stay_apart(device):
    tests = [
        {"name": f"test_add_{d}_float32", "classname": f"test_x.TestFoo{d.upper()}"} for d in (device, "cpu", "meta")
    ]
    assert [t.key for t in report_ids(tests)] == [
        "TestFoo.test_add_float32",
        "TestFooCPU.test_add_cpu_float32",
        "TestFooMETA.test_add_meta_float32",
    ]
