"""`manage.py structure graph [PACKAGE]` and `manage.py structure crossings PATH`: two measures of
the layering that docs/architecture.md describes, for before/after figures of a move.

* **graph**: PACKAGE's import graph (default `hud`), subpackages collapsed into one module each
  (`relay.tallies.*` is `relay.tallies`): the modules that import or are imported by another one of
  the package, the layers (the longest import chain) and the edges (imports deferred into
  functions count; an import of a module's member counts as one of the module).
* **crossings**: one GET of PATH in this process, on the configured database, under
  `sys.setprofile`: each distinct (caller, callee) pair of functions where a call goes from `hud`
  into `relay` (down) or from `relay` back into `hud` (up, through a callable handed down)."""

import ast
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Measure a package's import graph, or the hud↔relay call crossings of one page."

    def add_arguments(self, parser):
        parser.add_argument("what", choices=["graph", "crossings"])
        parser.add_argument("target", nargs="?", default="hud", help="graph: a package; crossings: a path")

    def handle(self, *args, what: str, target: str, **options):
        if what == "graph":
            modules, layers, edges = import_graph(Path(settings.BASE_DIR), target)
            self.stdout.write(f"{target}: {modules} modules / {layers} layers / {edges} edges")
        else:
            down, up = crossings(target)
            modules = {(_module(a), _module(b)) for a, b in down | up}
            self.stdout.write(
                f"GET {target}: {len(down)} hud→relay and {len(up)} relay→hud function pairs, "
                f"{len(modules)} module pairs, {len({a for a, _ in modules})} hud modules crossing"
            )
            for caller, callee in sorted(modules):
                self.stdout.write(f"  {caller} → {callee}")
            for caller, callee in sorted(down | up) if options["verbosity"] > 1 else ():
                self.stdout.write(f"    {caller} → {callee}")


# --- the import graph ------------------------------------------------------------------------------


def import_graph(root: Path, package: str) -> tuple[int, int, int]:
    files = _modules(root, package)
    edges = {_collapsed(name, package): set() for name in files}
    for name, path in files.items():
        for target in _imports(name, path, files):
            a, b = _collapsed(name, package), _collapsed(target, package)
            if a != b:
                edges[a].add(b)
    linked = {m for m, ts in edges.items() if ts} | {t for ts in edges.values() for t in ts}
    return len(linked), _longest_chain(edges, linked), sum(len(ts) for ts in edges.values())


def _modules(root: Path, package: str) -> dict[str, Path]:
    found = {}
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if "migrations" in parts:
            continue
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _collapsed(name: str, package: str) -> str:
    depth = package.count(".") + 2
    return ".".join(name.split(".")[:depth])


def _imports(name: str, path: Path, files: dict) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(name, path, node)
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return {t for t in found if t in files and t != name}


def _absolute(name: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _longest_chain(edges: dict, linked: set) -> int:
    depth: dict[str, int] = {}

    def chain(module: str, seen: frozenset) -> int:
        if module not in depth:
            below = [chain(t, seen | {module}) for t in edges.get(module, ()) if t not in seen]
            depth[module] = 1 + max(below, default=0)
        return depth[module]

    return max((chain(m, frozenset()) for m in linked), default=0)


# --- the crossings of one page ---------------------------------------------------------------------


def _module(function: str) -> str:
    return function.rsplit(".", 1)[0]


def crossings(path: str) -> tuple[set, set]:
    from django.test import Client

    client = Client(HTTP_HOST=settings.ALLOWED_HOSTS[0] if settings.ALLOWED_HOSTS else "localhost")
    client.get(path)  # warm caches and imports: the measured GET is a steady-state one
    down, up = set(), set()

    def profile(frame, event, arg):
        if event != "call" or frame.f_back is None:
            return
        callee, caller = frame.f_globals.get("__name__", ""), frame.f_back.f_globals.get("__name__", "")
        pair = (f"{caller}.{frame.f_back.f_code.co_name}", f"{callee}.{frame.f_code.co_name}")
        if caller.startswith("hud") and callee.startswith("relay"):
            down.add(pair)
        elif caller.startswith("relay") and callee.startswith("hud"):
            up.add(pair)

    sys.setprofile(profile)
    try:
        response = client.get(path)
    finally:
        sys.setprofile(None)
    if response.status_code != 200:
        raise CommandError(f"GET {path} answered {response.status_code}")
    return down, up
