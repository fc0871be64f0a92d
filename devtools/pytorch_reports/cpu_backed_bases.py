"""A device-type test base for TORCH_TEST_DEVICES (run by common_device_type with its globals, so
`DeviceTypeTestBase` is in scope and nothing is imported): PyTorch names the class and methods
from `device_type` (`TestFooXPU.test_x_xpu_float32`); the primary device stays the CPU, where the
tests' tensors live on a CPU-only build."""

import os

_WORD = os.environ["CRCR_FIXTURE_DEVICE"]


class CPUBackedTestBase(DeviceTypeTestBase):  # noqa: F821 (given by runpy's init_globals)
    device_type = _WORD

    @classmethod
    def get_primary_device(cls):
        return "cpu"

    @classmethod
    def get_all_devices(cls):
        return ["cpu"]

    def _should_stop_test_suite(self):
        return False


TEST_CLASS = CPUBackedTestBase
