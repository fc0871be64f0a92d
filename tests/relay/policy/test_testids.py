"""Test ids normalised across devices."""

import pytest

from relay.policy.testids import test_id


def normalize_test_id(name, classname="", file="", devices=()):
    """The identity as one dotted string, as the pages show it."""
    return test_id(name, classname, file, devices).full


@pytest.mark.parametrize(
    "name, classname",
    [
        ("test_add_xpu_float32", "TestFooXPU"),
        ("test_add_privateuse1_float32", "TestFooPRIVATEUSE1"),
        ("test_add_openreg_float32", "TestFooOPENREG"),
        ("test_add_cuda_float32", "TestFooCUDA"),
        ("test_add_mps_float32", "TestFooMPS"),
        ("TestFooXPU.test_add_xpu_float32", ""),
        ("test/test_foo.py::TestFooPRIVATEUSE1::test_add_privateuse1_float32", ""),
    ],
)
def test_the_same_test_on_every_device_gets_one_id(name, classname):
    assert normalize_test_id(name, classname).endswith("TestFoo.test_add_float32")


def test_it_keeps_dtype_and_parameter_suffixes():
    assert (
        normalize_test_id("test_conv_True_stride2_xpu_float16", "TestConvXPU")
        == "TestConv.test_conv_True_stride2_float16"
    )
    assert normalize_test_id("test_add_xpu_float32", "TestFooXPU") != normalize_test_id(
        "test_add_xpu_float64", "TestFooXPU"
    )


def test_it_keeps_the_module_path_of_the_class_without_the_test_directory():
    assert normalize_test_id("test_add_xpu", "test.test_ops.TestFooXPU") == "test_ops.TestFoo.test_add"
    assert (
        normalize_test_id("test_add_xpu", "distributed.test_c10d.TestFooXPU")
        == "distributed.test_c10d.TestFoo.test_add"
    )


def test_names_that_merely_contain_a_device_word_are_not_mangled():
    assert normalize_test_id("test_cudagraph_trees", "TestCudaGraphTrees") == "TestCudaGraphTrees.test_cudagraph_trees"
    assert normalize_test_id("test_graph_simple", "TestMPSGraph") == "TestMPSGraph.test_graph_simple"
    assert normalize_test_id("test_mps_available", "TestMPS") == "TestMPS.test_mps_available"
    assert normalize_test_id("test_xpuish_thing_xpu", "TestBarXPU") == "TestBar.test_xpuish_thing"


def test_a_method_of_a_class_not_instantiated_per_device_keeps_its_name():
    assert normalize_test_id("test_to_cuda", "TestCuda") == "TestCuda.test_to_cuda"


def test_only_the_instantiation_suffix_is_removed_not_every_device_word():
    assert normalize_test_id("test_to_cuda_xpu_float32", "TestMoveXPU") == "TestMove.test_to_cuda_float32"
    assert normalize_test_id("test_to_cuda_cuda_float32", "TestMoveCUDA") == "TestMove.test_to_cuda_float32"


def test_a_cpu_instantiation_is_the_upstream_test_like_any_device_type_s():
    """A CPU-architecture backend (RISC-V) runs the suites as PyTorch names them for CPU."""
    assert normalize_test_id("test_add_cpu_float32", "TestFooCPU") == "TestFoo.test_add_float32"
    assert normalize_test_id("test_add_meta_float32", "TestFooMETA") == "TestFoo.test_add_float32"


def test_a_class_that_merely_ends_like_a_device_type_keeps_its_name():
    assert normalize_test_id("test_scan", "TestCUDAPRIMITIVE") == "TestCUDAPRIMITIVE.test_scan"
    assert normalize_test_id("test_lazy_init", "") == "test_lazy_init"


def test_pytest_parameter_ids_in_brackets_are_kept_verbatim():
    assert normalize_test_id("test_op_xpu[add-xpu]", "TestOpsXPU") == "TestOps.test_op[add-xpu]"


def test_a_bare_method_name_is_normalised_on_its_own():
    assert normalize_test_id("test_add_xpu_float32") == "test_add_float32"
    assert normalize_test_id("  ") == ""


# --- one identity, whichever producer reported the test ------------------------------------------

from relay.policy.testids import TestId, TestIdResolver, TestTable  # noqa: E402

CONV = TestId("test_nn", "TestNNDeviceType.test_conv2d_backward_bfloat16")


@pytest.mark.parametrize(
    "name, classname, file",
    [
        # PyTorch's own CI (the OpenReg reference): JUnit written from inside test/
        ("test_conv2d_backward_privateuse1_bfloat16", "test_nn.TestNNDeviceTypePRIVATEUSE1", "test_nn.py"),
        # pytest --junit-xml from a checkout's root (our client forwards it as is)
        ("test_conv2d_backward_xpu_bfloat16", "test.test_nn.TestNNDeviceTypeXPU", "test/test_nn.py"),
        # unittest-xml-reporting
        ("test_conv2d_backward_cuda_bfloat16", "test_nn.TestNNDeviceTypeCUDA", "test/test_nn.py"),
        # the sandbox's and many reporters' shape: bare class, file beside it
        ("test_conv2d_backward_mps_bfloat16", "TestNNDeviceTypeMPS", "test/test_nn.py"),
        # a pytest node id as the only name
        ("test/test_nn.py::TestNNDeviceTypeXPU::test_conv2d_backward_xpu_bfloat16", "", ""),
        # a dotted id as the only name
        ("test_nn.TestNNDeviceTypeOPENREG.test_conv2d_backward_openreg_bfloat16", "", ""),
    ],
)
def test_every_producer_shape_gives_the_same_identity(name, classname, file):
    assert test_id(name, classname, file) == CONV


def test_a_module_is_not_invented_from_a_file_that_is_not_python():
    assert test_id("test_x_xpu", "TestFooXPU", "test_foo.cpp") == TestId("", "TestFoo.test_x")


def test_pytest_function_tests_have_a_module_and_no_class():
    assert test_id("test_bar", "test.test_foo", "test/test_foo.py") == TestId("test_foo", "test_bar")


def test_the_resolver_fills_in_a_missing_module_only_when_unambiguous():
    bare = TestId("", CONV.key)
    assert TestIdResolver([CONV, bare]).resolve(bare) == CONV
    other = TestId("test_nn_extra", CONV.key)
    assert TestIdResolver([CONV, other, bare]).resolve(bare) == bare


def test_a_table_finds_a_test_across_commits_when_one_side_lacks_the_module():
    table = TestTable({CONV: "ref"})
    assert table.find(TestId("", CONV.key)) == "ref"
    assert TestTable({TestId("", CONV.key): "b"}).find(CONV) == "b"
    assert table.find(TestId("test_ops", CONV.key)) is None
