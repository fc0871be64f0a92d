"""Out-of-tree runners' wrapper modules read as upstream's module (relay.policy.testids, issue 53 item 6).

The names are the ones torch-spyre's runner (the run_test.sh of its OOT test framework) makes: it writes
`<stem>__oot_wrapper.py` beside upstream's `<stem>.py`, instantiates the classes for PrivateUse1
(`TestProfilerPRIVATEUSE1`) and torch-spyre names the device `spyre`; its CI reports tests as
`test_inductor_ops__oot_wrapper.py::TestOpsPRIVATEUSE1::test_keep_by_index_4d_dim3_spyre`."""

import pytest

from relay.policy.testids import TestId, module_of, report_ids, test_id

REFERENCE = {
    "name": "test_scalar_support_openreg_float32",
    "classname": "test_binary_ufuncs.TestBinaryUfuncsPRIVATEUSE1",
}
WRAPPED = [
    # pytest's JUnit from inside upstream's test/ (the wrapper sits beside the original)
    {
        "name": "test_scalar_support_spyre_float32",
        "classname": "test_binary_ufuncs__oot_wrapper.TestBinaryUfuncsPRIVATEUSE1",
        "file": "test_binary_ufuncs__oot_wrapper.py",
    },
    # pytest's JUnit from upstream's checkout root
    {
        "name": "test_scalar_support_spyre_float32",
        "classname": "test.test_binary_ufuncs__oot_wrapper.TestBinaryUfuncsPRIVATEUSE1",
        "file": "test/test_binary_ufuncs__oot_wrapper.py",
    },
    # a pytest node id, as the runner's CI log names a test
    {"name": "test/test_binary_ufuncs__oot_wrapper.py::TestBinaryUfuncsPRIVATEUSE1::test_scalar_support_spyre_float32"},
]


@pytest.mark.parametrize("reported", WRAPPED)
def test_a_wrapped_upstream_test_is_the_reference_s_test(reported):
    [reference] = report_ids([REFERENCE])
    [wrapped] = report_ids([reported], device_type="spyre")
    assert wrapped == reference == TestId("test_binary_ufuncs", "TestBinaryUfuncs.test_scalar_support_float32")


def test_the_runner_s_ci_name_reads_as_upstream_s_module():
    tid = test_id("test_inductor_ops__oot_wrapper.py::TestOpsPRIVATEUSE1::test_keep_by_index_4d_dim3_spyre")
    assert tid == TestId("test_inductor_ops", "TestOps.test_keep_by_index_4d_dim3")


@pytest.mark.parametrize(
    ("classname", "file", "module"),
    [
        ("test_profiler__oot_wrapper.TestProfilerPRIVATEUSE1", "", "test_profiler"),
        ("", "test/distributed/test_c10d__oot_wrapper.py", "distributed.test_c10d"),
        ("test.test_view_ops__oot_wrapper", "", "test_view_ops"),
    ],
)
def test_counts_of_a_wrapper_are_kept_under_upstream_s_module(classname, file, module):
    assert module_of(classname, file) == module


@pytest.mark.parametrize(
    "classname",
    ["test_oot_wrapper.TestX", "__oot_wrapper.TestX", "test_nn__oot_wrapper_extra.TestX", "test__oot_wrapper.x.TestX"],
)
def test_only_the_module_s_stem_ending_in_the_suffix_is_a_wrapper(classname):
    expected = classname.rpartition(".")[0].removeprefix("test.")
    assert module_of(classname) == expected
