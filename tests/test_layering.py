"""The dependency rules: relay never imports hud (the HUD reads what the relay records); the
product never imports the development tools; the stand-in never imports the app."""

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_relay_never_imports_hud():
    offenders = [
        str(path.relative_to(ROOT)) for path in (ROOT / "relay").rglob("*.py")
        if any(name == "hud" or name.startswith("hud.") for name in imported_modules(path))
    ]
    assert offenders == []


PRODUCT = ("crcr", "relay", "hud", "api")
DEV_TOOLS = ("devtools", "bench", "standin")


def test_the_product_never_imports_the_development_tools():
    """The production image does not ship devtools/, so one such import would break it there.
    (Relative imports stay inside their own top-level package, so absolute ones are all to check.)"""
    offenders = [
        f"{path.relative_to(ROOT)}: {name}" for package in PRODUCT for path in (ROOT / package).rglob("*.py")
        for name in imported_modules(path) if name.split(".")[0] in DEV_TOOLS
    ]
    assert offenders == []


def test_the_development_tools_are_not_part_of_the_installed_package():
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {pattern.split(".")[0] for pattern in include} == set(PRODUCT)


def test_the_standin_never_imports_the_app():
    for path in (ROOT / "devtools" / "standin").rglob("*.py"):
        assert not any(name.split(".")[0] in ("relay", "hud", "api", "crcr") for name in imported_modules(path)), path
