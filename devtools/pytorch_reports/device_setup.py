"""Imported first by the generic test module, before torch's test machinery: makes the device
named by CRCR_FIXTURE_DEVICE exist the way an out-of-tree backend does, so that
`instantiate_device_type_tests` instantiates for it.

* A PrivateUse1 name (openreg, npu, spyre, rbln, ...): `torch.utils.rename_privateuse1_backend`
  plus a minimal device module registered with `torch._register_device_module` (what OpenReg and
  torch_npu do; ours only answers availability questions, it has no kernels, so the tests keep
  their tensors on the CPU).
* xpu, cuda, mps: these device types cannot be instantiated on a CPU-only build, so
  `cpu_backed_bases.py` adds a device-type base through PyTorch's documented extension point
  (`TORCH_TEST_DEVICES`, see common_device_type's "How to extend DeviceTypeTestBase") whose
  `device_type` is that word and whose tensors stay on the CPU. Names are then made by PyTorch's
  own `instantiate_test`, exactly as on the real device."""

import os
import sys
import types
from pathlib import Path

import torch

DEVICE = os.environ.get("CRCR_FIXTURE_DEVICE", "cpu")
CPU_BACKED = ("xpu", "cuda", "mps")


def _device_module(name: str) -> types.ModuleType:
    module = types.ModuleType(f"torch.{name}")
    module.is_available = lambda: True
    module.device_count = lambda: 1
    module.current_device = lambda: 0
    module.is_initialized = lambda: True
    module._is_in_bad_fork = lambda: False
    module.manual_seed = lambda seed: None
    module.manual_seed_all = lambda seed: None
    module.synchronize = lambda device=None: None
    return module


if os.environ.get("CRCR_FIXTURE_BROKEN_IMPORT"):
    raise ImportError(f"libtorch_{DEVICE}.so: cannot open shared object file: No such file or directory")
if DEVICE in CPU_BACKED:
    os.environ["TORCH_TEST_DEVICES"] = str(Path(__file__).with_name("cpu_backed_bases.py"))
elif DEVICE != "cpu":
    torch.utils.rename_privateuse1_backend(DEVICE)
    torch._register_device_module(DEVICE, _device_module(DEVICE))
    sys.modules[f"torch.{DEVICE}"] = getattr(torch, DEVICE)
