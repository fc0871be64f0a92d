"""Make the JUnit fixtures in tests/fixtures/pytorch-reports/ with the real producers.

Run with a Python that has torch (the CPU wheel is enough), pytest and unittest-xml-reporting,
never the project's own environment (torch is no dependency of this repo):

    python3 -m venv /tmp/torch-venv
    /tmp/torch-venv/bin/pip install torch==2.13.0 pytest unittest-xml-reporting
    /tmp/torch-venv/bin/python devtools/pytorch_reports/make_fixtures.py

For each device it copies test_device_generic.py into a scratch checkout's `test/` and runs it:

* `pytest-test-dir.xml`: `pytest --junitxml` from inside `test/` with PyTorch's pytest.ini
  setting `junit_family=xunit1` (classname `test_device_generic.TestDeviceGenericPRIVATEUSE1`,
  a `file` attribute), as PyTorch's CI runs it;
  `test_pytest_outcomes.py` adds pytest's own shapes (xfail with a reason, a strict xfail
  that passes, a fixture's setup error, bracket ids);
* `pytest-root.xml`: `pytest --junitxml` from the checkout's root with pytest's defaults
  (classname `test.test_device_generic.…`, no `file`), as most downstream CI does;
* `unittest/*.xml` and `unittest-verbose.log`: the test file's own `run_tests()` with
  `--save-xml` and `-v`, i.e. PyTorch's XMLTestResultVerbose over unittest-xml-reporting (one
  file per class, as PyTorch's CI uploads them), and the verbose lines a job log carries.

Devices: PrivateUse1 backends by their registered names (openreg is upstream's reference;
npu is Ascend's; spyre and rbln are other out-of-tree backends), and xpu, cuda (what ROCm
reports) and mps through a CPU-backed device-type base (see device_setup.py). openreg also
gets `pytest-collection-error.xml`: the test module fails on import, so pytest reports an error
before any test ran (what a broken build or environment looks like in JUnit)."""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_OUT = REPO / "tests" / "fixtures" / "pytorch-reports"
DEVICES = ("openreg", "npu", "spyre", "rbln", "xpu", "cuda", "mps", "cpu")
SOURCES = ("test_device_generic.py", "test_pytest_outcomes.py", "device_setup.py", "cpu_backed_bases.py")
TIMEOUT = 300
BROKEN_IMPORT_DEVICE = "openreg"
"""Also gets `pytest-collection-error.xml`: the module fails to import, no test runs."""


def checkout(root: Path) -> Path:
    """A scratch checkout: the sources under `test/`, where PyTorch keeps its tests."""
    tests = root / "test"
    tests.mkdir(parents=True)
    for name in SOURCES:
        shutil.copy(HERE / name, tests / name)
    return root


def run(cmd: list[str], cwd: Path, device: str, broken: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "CRCR_FIXTURE_DEVICE": device, "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    if broken:
        env["CRCR_FIXTURE_BROKEN_IMPORT"] = "1"
    env.pop("CI", None)  # torch's run_tests changes behaviour on CI
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT)


def make_device(device: str, out: Path) -> None:
    target = out / device
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="crcr-reports-") as scratch:
        root = checkout(Path(scratch) / "pytorch")
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
        run(
            [
                *pytest,
                "-o",
                "junit_family=xunit1",
                f"--junitxml={target / 'pytest-test-dir.xml'}",
                "test_device_generic.py",
                "test_pytest_outcomes.py",
            ],
            root / "test",
            device,
        )
        run([*pytest, f"--junitxml={target / 'pytest-root.xml'}", "test/test_device_generic.py"], root, device)
        if device == BROKEN_IMPORT_DEVICE:
            run(
                [
                    *pytest,
                    "-o",
                    "junit_family=xunit1",
                    f"--junitxml={target / 'pytest-collection-error.xml'}",
                    "test_device_generic.py",
                ],
                root / "test",
                device,
                broken=True,
            )
        saved = Path(scratch) / "reports"
        log = run([sys.executable, "test_device_generic.py", "-v", "--save-xml", str(saved)], root / "test", device)
        (target / "unittest-verbose.log").write_text(log.stderr)
        unittest_dir = target / "unittest"
        unittest_dir.mkdir()
        for xml in sorted(saved.rglob("*.xml")):
            shutil.copy(xml, unittest_dir / _without_timestamp(xml.name))
    for name in ("pytest-test-dir.xml", "pytest-root.xml"):
        if not (target / name).exists():
            raise SystemExit(f"{device}: pytest wrote no {name}")
    if not any(unittest_dir.iterdir()):
        raise SystemExit(f"{device}: run_tests --save-xml wrote no report:\n{log.stderr[-2000:]}")
    print(f"{device}: {', '.join(sorted(p.relative_to(target).as_posix() for p in target.rglob('*.*')))}")


def _without_timestamp(name: str) -> str:
    """xmlrunner names a file TEST-<class>-<yyyymmddHHMMSS>.xml; the fixture keeps the class."""
    stem = name.removesuffix(".xml")
    head, _, tail = stem.rpartition("-")
    return f"{head}.xml" if head and tail.isdigit() else name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--device", action="append", choices=DEVICES, help="default: all")
    args = parser.parse_args()
    import torch  # noqa: F401  (fail early and clearly without torch)

    for device in args.device or DEVICES:
        make_device(device, args.out)


if __name__ == "__main__":
    main()
