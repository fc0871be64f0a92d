"""Tests of client/crcr_report.py, the reporting client downstream CI runs with plain Python."""

import importlib.util
import sys
from pathlib import Path

CLIENT = Path(__file__).resolve().parents[2] / "client" / "crcr_report.py"
JUNIT = Path(__file__).resolve().parent / "junit"


def client_module():
    """The client imported by path: it is a standalone script, not part of any package."""
    if "crcr_report" not in sys.modules:
        spec = importlib.util.spec_from_file_location("crcr_report", CLIENT)
        module = importlib.util.module_from_spec(spec)
        sys.modules["crcr_report"] = module  # dataclasses look their module up while being built
        spec.loader.exec_module(module)
    return sys.modules["crcr_report"]


def huge_junit_write(path: Path, failures: int, message_bytes: int, stack_bytes: int, passes: int = 0) -> Path:
    """A pytest-style report far beyond the relay's caps: many failures with long texts."""
    message, stack = "x" * message_bytes, "    frame\n" * (stack_bytes // 10)
    cases = [
        f'<testcase classname="test.test_ops.TestCommonXPU" name="test_pass_{i}" time="0.010"/>' for i in range(passes)
    ]
    cases += [
        f'<testcase classname="test.test_ops.TestCommonXPU" name="test_case_{i}" file="test/test_ops.py" time="0.020">'
        f'<failure message="AssertionError: {message}">{stack}</failure></testcase>'
        for i in range(failures)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'
        f'<testsuite name="pytest" errors="0" failures="{failures}" skipped="0" tests="{failures + passes}">'
        + "".join(cases)
        + "</testsuite></testsuites>"
    )
    return path
