"""Test ids normalised across devices."""

import pytest

from hud.testids import normalize_test_id


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
    assert normalize_test_id("test_conv_True_stride2_xpu_float16", "TestConvXPU") == "TestConv.test_conv_True_stride2_float16"
    assert normalize_test_id("test_add_xpu_float32", "TestFooXPU") != normalize_test_id("test_add_xpu_float64", "TestFooXPU")


def test_it_keeps_the_module_path_of_the_class():
    assert normalize_test_id("test_add_xpu", "test.test_ops.TestFooXPU") == "test.test_ops.TestFoo.test_add"


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


def test_cpu_instantiations_stay_distinct_from_accelerator_ones():
    assert normalize_test_id("test_add_cpu_float32", "TestFooCPU") == "TestFooCPU.test_add_cpu_float32"


def test_pytest_parameter_ids_in_brackets_are_kept_verbatim():
    assert normalize_test_id("test_op_xpu[add-xpu]", "TestOpsXPU") == "TestOps.test_op[add-xpu]"


def test_a_bare_method_name_is_normalised_on_its_own():
    assert normalize_test_id("test_add_xpu_float32") == "test_add_float32"
    assert normalize_test_id("  ") == ""
