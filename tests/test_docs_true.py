"""Docs that stay true: every repository path, dotted module reference and route named in
docs/*.md, the README and the product's docstrings exists. A move that leaves a doc pointing at a
removed file fails here, not in a reader's hands."""

import ast
import importlib
import re
from pathlib import Path

import pytest
from django.urls import Resolver404, resolve

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("relay", "hud", "api", "crcr", "devtools", "client")
TOP = ("relay", "hud", "api", "crcr", "devtools", "client", "tests", "docs", "static", "templates")

PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(TOP)})/[\w./*-]*\w)(?:::(\w+))?")
"""relay/checks/gate.py, tests/security/, hud/templates/hud/commit.html, path.py::name."""
DOTTED = re.compile(rf"(?<![\w./-])((?:{'|'.join(PACKAGES[:4])})\.[a-z_][\w.]*[a-zA-Z0-9_])")
"""relay.policy.verdicts.job_verdicts, hud.selectors_grid: a module, or an attribute of one."""
ROUTE = re.compile(r"`((?:GET |POST |PUT |PATCH |DELETE )?/[\w/<>{}.:?=&%-]*)`")
"""`/github/callback`, `GET /api/v1/prs/<n>/gate`: a route in backticks."""
PLACEHOLDER = re.compile(r"<[^>]+>|\{[^}]+\}")
NOT_PATHS = {"crcr/gate"}
"""Names that look like paths: the merge gate's check-run name."""
ELSEWHERE = {"usr", "proc", "run", "repos", "_standin", "_s3"}
"""Routes on other servers or paths on the host: the machine, GitHub's API, the stand-in's control and its S3-shaped bucket."""
SAMPLES = {"sha": "a" * 40, "n": "7", "number": "7", "pr": "7", "id": "1", "org": "o", "repo": "r"}


def docs() -> list[Path]:
    return sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]


def docstrings() -> dict[Path, str]:
    """The module docstring and every class/function docstring of the product's modules."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            tree = ast.parse(path.read_text())
            nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.ClassDef, ast.FunctionDef)))]
            found[path] = "\n".join(filter(None, (ast.get_docstring(n) for n in nodes)))
    return found


def texts() -> dict[Path, str]:
    return {**{path: path.read_text() for path in docs()}, **docstrings()}


# --- the checks -------------------------------------------------------------------------------------


def missing_paths(text: str) -> list[str]:
    missing = []
    for match in PATH.finditer(text):
        path, name = match.group(1).rstrip("."), match.group(2)
        target = ROOT / path
        family = path + "*" if path.endswith("_") else path
        if path in NOT_PATHS or _a_template(path) or ("*" in family and any(ROOT.glob(family))):
            continue  # a template's name, or a family of files by prefix (hud/selectors_*.py)
        if not target.exists():
            missing.append(path)
        elif (
            name
            and target.is_file()
            and not re.search(rf"\b(?:def|class)\s+{name}\b|^{name}\s*=", target.read_text(), re.M)
        ):
            missing.append(f"{path}::{name}")
    return missing


def _a_template(path: str) -> bool:
    return path.endswith(".html") and any(ROOT.glob(f"*/templates/{path}"))


def dangling_references(text: str) -> list[str]:
    refs = dict.fromkeys(m.group(1) for m in DOTTED.finditer(text))
    return [ref for ref in refs if not (_resolves(ref) or ref in _names_not_modules() or _a_prefix(ref))]


def _names_not_modules() -> set[str]:
    """Dotted names that are not Python: Celery task names and permissions (app.codename), and hosts."""
    from django.apps import apps

    from crcr.celery import app

    app.loader.import_default_modules()
    models = [m._meta for m in apps.get_models()]
    default = {f"{m.app_label}.{verb}_{m.model_name}" for m in models for verb in m.default_permissions}
    declared = {f"{m.app_label}.{codename}" for m in models for codename, _ in m.permissions}
    return set(app.tasks) | default | declared | {"api.github.com"}


def _a_prefix(ref: str) -> bool:
    """hud.selectors_ names the family hud.selectors_grid, hud.selectors_backend, …"""
    return ref.endswith("_") and any(ROOT.glob(ref.replace(".", "/") + "*.py"))


def _resolves(dotted: str) -> bool:
    """A module, or a module's attribute (a class's too: relay.models.JobRun.Status)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return (ROOT / "/".join(parts[:cut]) / attr).with_suffix(".py").exists()
            obj = getattr(obj, attr)
        return True
    return False


def unknown_routes(text: str) -> list[str]:
    unknown = []
    for match in ROUTE.finditer(text):
        route = match.group(1).split(" ", 1)[-1].split("?")[0]
        if route == "/" or "." in route.rsplit("/", 1)[-1] or route.split("/")[1] in ELSEWHERE:
            continue  # the root always resolves; /static/x.js and file names are not routes
        sample = PLACEHOLDER.sub(lambda m: SAMPLES.get(m.group(0)[1:-1].split(":")[-1], "1"), route)
        sample = re.sub(r"\d{10,}", "7", sample)  # an out-of-range number in a 404 example
        if not any(_resolves_route(s) for s in (sample, sample.rstrip("/") + "/")):
            unknown.append(route)
    return unknown


def _resolves_route(path: str) -> bool:
    try:
        resolve(path)
    except Resolver404:
        return False
    return True


# --- over the tree ----------------------------------------------------------------------------------


@pytest.mark.parametrize("check", [missing_paths, dangling_references, unknown_routes], ids=lambda c: c.__name__)
def test_every_path_reference_and_route_named_in_docs_and_docstrings_exists(check):
    found = {str(path.relative_to(ROOT)): bad for path, text in texts().items() if (bad := check(text))}
    assert found == {}


# --- each checker on a broken example ----------------------------------------------------------------


def test_a_removed_path_and_a_removed_function_are_found():
    assert missing_paths("see `relay/nowhere.py` and relay/policy/verdicts.py::no_such_rule") == [
        "relay/nowhere.py",
        "relay/policy/verdicts.py::no_such_rule",
    ]
    assert missing_paths("relay/policy/verdicts.py::job_verdicts, tests/security/ and docs/security.md.") == []
    assert missing_paths("hud/selectors_*.py, api/views*.py and hud/views_") == []
    assert missing_paths("hud/nothing_*.py") == ["hud/nothing_*.py"]


def test_a_reference_to_a_moved_module_is_found():
    assert dangling_references("the rule in hud.status.probe_state") == ["hud.status.probe_state"]
    assert dangling_references("relay.policy.verdicts.probe_state and relay.models.JobRun.Status") == []


def test_a_route_that_does_not_exist_is_found():
    assert unknown_routes("`/webhooks` and `/callbacks`") == ["/webhooks", "/callbacks"]
    assert unknown_routes("`/github/webhook`, `GET /api/v1/prs/<n>/gate`, `/commit/<sha>`") == []


LAYOUT_ROW = re.compile(r"^\| `([\w/]+/)`(?: \(top level\))? \| ~([\d,]+) \| (.*) \|$", re.M)
"""A row of the architecture's layout table: | `relay/results/` | ~3,000 | models, verdicts |"""


def layout_rows() -> dict[str, tuple[int, str]]:
    layout = (ROOT / "docs" / "architecture.md").read_text().split("### The layout", 1)[1].split("###", 1)[0]
    return {m[1]: (int(m[2].replace(",", "")), m[3]) for m in LAYOUT_ROW.finditer(layout)}


def row_files(row: str, rows) -> list[Path]:
    """A row's Python files: its directory's, less migrations and the sub-packages with rows of their own."""
    others = [ROOT / other for other in rows if other != row and other.startswith(row)]
    return [
        path
        for path in (ROOT / row).rglob("*.py")
        if "migrations" not in path.parts and not any(other in path.parents for other in others)
    ]


def relay_packages_imported(files: list[Path], rows) -> set[str]:
    """The relay sub-packages with a row of their own that these files import (deferred imports too)."""
    found = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            names += [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                slashed = name.replace(".", "/") + "/"
                owners = [
                    row for row in rows if row.startswith("relay/") and row != "relay/" and slashed.startswith(row)
                ]
                found |= {max(owners, key=len)} if owners else set()
    return found


def test_the_architecture_layout_lists_every_product_package():
    packages = {
        str(init.parent.relative_to(ROOT)) + "/"
        for top in ("crcr", "relay", "hud", "api")
        for init in (ROOT / top).rglob("__init__.py")
        if "migrations" not in init.parts and len(init.parent.relative_to(ROOT).parts) <= 2
    }
    assert packages - set(layout_rows()) == set()


def test_the_layout_counts_each_package_s_lines_to_within_a_sixth():
    rows = layout_rows()
    counted = {row: sum(len(path.read_text().splitlines()) for path in row_files(row, rows)) for row in rows}
    off = {
        row: (said, counted[row])
        for row, (said, _) in rows.items()
        if abs(said - counted[row]) > max(30, counted[row] / 6)
    }
    assert off == {}


def test_the_layout_names_every_relay_package_each_package_depends_on():
    rows = layout_rows()
    unnamed = {
        row: sorted(missing)
        for row, (_, depends) in rows.items()
        for imported in [relay_packages_imported(row_files(row, rows), rows) - {row}]
        if (
            missing := {
                dep for dep in imported if not dep.startswith(row) and dep.rstrip("/").rsplit("/", 1)[1] not in depends
            }
        )
    }
    assert unnamed == {}


def test_a_stale_count_and_an_unnamed_dependency_are_found(tmp_path):
    (tmp_path / "x.py").write_text("from relay.results.cells import cells_for_commits\n")
    assert relay_packages_imported([tmp_path / "x.py"], ["relay/", "relay/results/", "relay/levels/"]) == {
        "relay/results/"
    }
    row = "| `relay/results/` | ~3,000 | models, verdicts |"
    assert LAYOUT_ROW.findall(row) == [("relay/results/", "3,000", "models, verdicts")]
