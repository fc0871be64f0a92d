"""Job logs made by the real producer: `python -m unittest discover -v` over
tests/fixtures/unittest_log/suite_*.py, as GitHub serves a job's log (each line timestamped)."""

import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SUITES = FIXTURES / "unittest_log"
PYTORCH_OPENREG_LOG = FIXTURES / "pytorch-reports" / "openreg" / "unittest-verbose.log"
"""PyTorch 2.13.0's own run_tests -v on an OpenReg-named PrivateUse1 device (devtools/pytorch_reports)."""


def unittest_verbose_output(pattern: str = "suite_*.py") -> str:
    done = subprocess.run(
        [sys.executable, "-m", "unittest", "discover", "-v", "-p", pattern],
        cwd=SUITES,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout + done.stderr


def github_log(text: str, before: str = "##[group]Run python -m unittest discover -v\n") -> str:
    """GitHub's log format: every line prefixed by an ISO timestamp with 7 fractional digits."""
    lines = (before + text).splitlines()
    return "".join(f"2026-12-03T15:{i // 60 % 60:02d}:{i % 60:02d}.{i:07d}Z {line}\n" for i, line in enumerate(lines))
