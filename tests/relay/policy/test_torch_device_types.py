"""relay/policy/torch_device_types.py is what devtools/pytorch_reports/device_types.py prints from the
real torch: checked whenever a Python with torch is at hand (CRCR_TORCH_PYTHON, or the venv
`make pytorch-fixtures` makes), skipped otherwise — torch is no dependency of the project."""

import os
import subprocess
from pathlib import Path

import pytest

from relay.policy import torch_device_types

REPO = Path(__file__).parents[3]
SCRIPT = REPO / "devtools" / "pytorch_reports" / "device_types.py"
TORCH_VENV_PYTHON = Path(os.environ.get("TORCH_VENV", "/tmp/crcr-torch-venv")) / "bin" / "python"


def torch_python() -> str | None:
    candidate = os.environ.get("CRCR_TORCH_PYTHON") or str(TORCH_VENV_PYTHON)
    if not Path(candidate).exists():
        return None
    probe = subprocess.run([candidate, "-c", "import torch"], capture_output=True, timeout=120)
    return candidate if probe.returncode == 0 else None


def test_the_checked_in_list_is_what_torch_itself_says():
    python = torch_python()
    if python is None:
        pytest.skip("no Python with torch here (set CRCR_TORCH_PYTHON, or run `make pytorch-fixtures`)")
    printed = subprocess.run([python, str(SCRIPT)], capture_output=True, text=True, timeout=300, check=True).stdout
    assert (REPO / "relay" / "torch_device_types.py").read_text() == printed


def test_the_list_holds_the_device_types_backends_report_under():
    assert {"cpu", "cuda", "xpu", "mps", "meta", "hpu", "mtia", "xla", "privateuse1"} <= set(
        torch_device_types.DEVICE_TYPES
    )
    assert all(name == name.lower() for name in torch_device_types.DEVICE_TYPES)
