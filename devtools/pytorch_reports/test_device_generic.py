"""A small device-generic upstream test, instantiated by PyTorch's own machinery for the CPU and
for the device that device_setup makes: every outcome a producer reports (pass, failure, error,
skip, expected failure, unexpected success), dtype and parametrize suffixes, and upstream names
that themselves contain device words (`test_to_cuda`, `test_npu_format_cast`), which no identity
may strip. Copied into a scratch checkout's `test/` by make_fixtures.py; not a test of this repo."""

import device_setup  # noqa: F401, I001  (before torch's test machinery: it picks devices on import)
import unittest

import torch
from torch.testing._internal.common_device_type import dtypes, instantiate_device_type_tests
from torch.testing._internal.common_utils import TestCase, parametrize, run_tests


class TestDeviceGeneric(TestCase):
    @dtypes(torch.float32, torch.int64)
    def test_add(self, device, dtype):
        self.assertEqual(torch.ones(2, dtype=dtype) + 1, torch.full((2,), 2, dtype=dtype))

    @dtypes(torch.float32)
    def test_mul_overflow(self, device, dtype):
        # Fails everywhere: an upstream break every backend shares with the reference.
        self.assertEqual(torch.tensor([3.0], dtype=dtype) * 2, torch.tensor([7.0], dtype=dtype))

    @parametrize("op", ["add", "sub"])
    @dtypes(torch.float32)
    def test_binary(self, device, dtype, op):
        result = getattr(torch, op)(torch.ones(2, dtype=dtype), 1)
        expected = 2 if op == "add" else 1  # sub fails: 1 - 1 is 0
        self.assertEqual(result, torch.full((2,), expected, dtype=dtype))

    def test_to_cuda(self, device):
        self.assertEqual(torch.zeros(1).device.type, "cpu")

    def test_npu_format_cast(self, device):
        self.assertEqual(torch.arange(3).sum().item(), 4)  # fails: an upstream name with a device word

    def test_index_error(self, device):
        torch.zeros(2)[5]  # IndexError: an error, not a failure

    def test_needs_two_devices(self, device):
        self.skipTest("needs two devices")

    @unittest.expectedFailure
    def test_known_broken(self, device):
        self.assertEqual(torch.zeros(1), torch.ones(1))

    @unittest.expectedFailure
    def test_fixed_upstream(self, device):
        self.assertEqual(torch.ones(1), torch.ones(1))  # passes: an unexpected success


instantiate_device_type_tests(TestDeviceGeneric, globals(), only_for=("cpu", device_setup.DEVICE))

if __name__ == "__main__":
    run_tests()
