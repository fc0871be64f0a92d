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


# --- import circles ---------------------------------------------------------------------------------


def product_modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name → (file, is a package), for every product module but migrations."""
    modules = {}
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            modules[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return modules


def module_level_imports(name: str, modules: dict) -> set[str]:
    """The product modules `name` imports when it is imported (deferred imports inside functions
    do not count: they run after every module has loaded)."""
    path, is_package = modules[name]
    here = name.split(".") if is_package else name.split(".")[:-1]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*here[: len(here) - node.level + 1], *([node.module] if node.module else [])]) if node.level else node.module
            subs = [f"{base}.{alias.name}" for alias in node.names]
            targets = [sub for sub in subs if sub in modules] + ([base] if any(sub not in modules for sub in subs) else [])
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while not group or group[-1] != node:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                groups.append(sorted(group))

    for node in graph:
        if node not in index:
            visit(node)
    return groups


def test_no_product_module_imports_itself_back_at_import_time():
    modules = product_modules()
    assert circles({name: module_level_imports(name, modules) for name in modules}) == []


def test_the_circle_finder_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
