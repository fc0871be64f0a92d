"""The dependency rule: relay never imports hud (the HUD reads what the relay records)."""

import ast
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


def test_the_standin_never_imports_the_app():
    for path in (ROOT / "standin").rglob("*.py"):
        assert not any(name.split(".")[0] in ("relay", "hud", "api", "crcr") for name in imported_modules(path)), path
