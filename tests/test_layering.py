"""The dependency rules, each checked over the tree and each checker tested on a broken example:

- relay never imports hud (the HUD reads what the relay records);
- the product never imports the development tools; the stand-in never imports the app;
- no product module imports itself back when it is imported (no module-level circle), and the
  relay's (and HUD's) packages depend on each other one way only, deferred imports included;
- the HUD's views and template tags read the database only through the HUD's read modules;
- the API's views call only selectors and services.

The flow these rules keep readable is drawn in docs/architecture.md."""

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
        str(path.relative_to(ROOT))
        for path in (ROOT / "relay").rglob("*.py")
        if any(name == "hud" or name.startswith("hud.") for name in imported_modules(path))
    ]
    assert offenders == []


PRODUCT = ("crcr", "relay", "hud", "api")
DEV_TOOLS = ("devtools", "bench", "standin")


def test_the_product_never_imports_the_development_tools():
    """The production image does not ship devtools/, so one such import would break it there.
    (Relative imports stay inside their own top-level package, so absolute ones are all to check.)"""
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] in DEV_TOOLS
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
            base = (
                ".".join([*here[: len(here) - node.level + 1], *([node.module] if node.module else [])])
                if node.level
                else node.module
            )
            subs = [f"{base}.{alias.name}" for alias in node.names]
            targets = [sub for sub in subs if sub in modules] + (
                [base] if any(sub not in modules for sub in subs) else []
            )
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


def test_the_circle_finder_finds_no_circle_in_a_chain():
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_a_module_level_circle_is_found_in_source():
    modules = {"pkg": (None, True), "pkg.a": (None, False), "pkg.b": (None, False)}
    sources = {"pkg": "", "pkg.a": "from .b import x\n", "pkg.b": "from . import a\n"}
    graph = {name: imports_in(name, sources[name], modules, deferred=False) for name in modules}
    assert circles(graph) == [["pkg.a", "pkg.b"]]


def test_a_deferred_import_does_not_make_a_module_level_circle():
    modules = {"pkg": (None, True), "pkg.a": (None, False), "pkg.b": (None, False)}
    sources = {"pkg": "", "pkg.a": "from .b import x\n", "pkg.b": "def f():\n    from . import a\n"}
    graph = {name: imports_in(name, sources[name], modules, deferred=False) for name in modules}
    assert circles(graph) == []


# --- packages depend one way, deferred imports included --------------------------------------------


def relay_wings() -> tuple[str, ...]:
    """Each package of relay (a folder with a front door, relay/<wing>/__init__.py) is one unit."""
    return tuple(sorted(f"relay.{path.parent.name}" for path in (ROOT / "relay").glob("*/__init__.py")))


UNITS = relay_wings()
"""Packages that count as one unit: within a unit, a task and the service it runs may name each
other in a deferred import (the service kicks the task); between units, the flow goes one way, so
no two wings of relay import each other, however far round."""


def imports_in(name: str, source: str, modules: dict, deferred: bool = True) -> set[str]:
    """The product modules `name` imports (at any depth if `deferred`, else only at import time)."""
    is_package = modules[name][1]
    here = name.split(".") if is_package else name.split(".")[:-1]
    tree = ast.parse(source)
    nodes = ast.walk(tree) if deferred else tree.body
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (
                ".".join([*here[: len(here) - node.level + 1], *([node.module] if node.module else [])])
                if node.level
                else node.module
            )
            subs = [f"{base}.{alias.name}" for alias in node.names]
            targets = [sub for sub in subs if sub in modules] + (
                [base] if any(sub not in modules for sub in subs) else []
            )
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def unit_of(module: str) -> str:
    return next((unit for unit in UNITS if module == unit or module.startswith(unit + ".")), module)


def unit_graph(modules: dict, sources: dict) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name in modules:
        edges = {unit_of(target) for target in imports_in(name, sources[name], modules)} - {unit_of(name)}
        graph.setdefault(unit_of(name), set()).update(edges)
    for targets in list(graph.values()):
        for target in targets:
            graph.setdefault(target, set())
    return graph


def test_the_packages_depend_on_each_other_one_way_even_through_deferred_imports():
    modules = product_modules()
    sources = {name: path.read_text() for name, (path, _) in modules.items()}
    assert circles(unit_graph(modules, sources)) == []


def test_no_module_imports_itself_back_even_through_imports_deferred_into_functions():
    """Stricter than the packages rule: inside a package too. The outbox engine kicks a send by
    its task's registered name, so a kind never imports the task module that imports it."""
    modules = product_modules()
    sources = {name: path.read_text() for name, (path, _) in modules.items()}
    assert circles({name: imports_in(name, sources[name], modules) for name in modules}) == []


def test_a_task_kicked_through_a_deferred_import_is_a_circle():
    modules = {"pkg": (None, True), "pkg.sending": (None, False), "pkg.tasks": (None, False)}
    sources = {
        "pkg": "",
        "pkg.tasks": "from . import sending\n",
        "pkg.sending": "def kick():\n    from .tasks import send\n",
    }
    graph = {name: imports_in(name, sources[name], modules) for name in modules}
    assert circles(graph) == [["pkg.sending", "pkg.tasks"]]


def test_the_relay_hud_and_api_never_import_the_project_package():
    """crcr (settings, Celery app, beat) sits above the apps: the apps reach the Celery app as
    celery.current_app, never by importing crcr back."""
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for package in ("relay", "hud", "api")
        for path in (ROOT / package).rglob("*.py")
        for name in imported_modules(path)
        if name.split(".")[0] == "crcr"
    ]
    assert offenders == []


# --- only the results read model computes results ------------------------------------------------

CELL_POLICY = {"cell_state", "reference_state", "awaiting_results_state", "dispatch_cell_state"}
"""relay.policy.verdicts' rules that make a cell of jobs and dispatches: applied only in relay/results."""
ENGINE = {
    "cells_for_commits",
    "cell_for",
    "commit_baseline",
    "grid_baseline",
    "backend_baseline",
    "baseline_marks",
    "streaks",
    "commit_streaks",
    "cell_failures",
}
"""The read model's engine: defined only in relay/results (the rest call it)."""
JOB_KIND_RULES = {
    "failure_kind",
    "test_kind",
    "job_level_kind",
    "mark_for",
    "upstream_broken",
    "infrastructure_failure",
}
"""Shared with the reference or the backend's own, infrastructure, upstream broken: decided only in
relay/results/baseline.py (issue 43: the PR page had a second rule for a job's kind)."""


def results_offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    offences = [
        f"imports {alias.name} from relay.policy.verdicts"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module == "relay.policy.verdicts"
        or (isinstance(node, ast.ImportFrom) and node.level and node.module == "verdicts")
        for alias in node.names
        if alias.name in CELL_POLICY
    ]
    offences += [
        f"defines {node.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name in ENGINE | JOB_KIND_RULES
    ]
    return offences


def test_nothing_outside_relay_results_computes_a_cell_a_baseline_or_a_culprit():
    offenders = {
        str(path.relative_to(ROOT)): offences
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
        and (ROOT / "relay" / "results") not in path.parents
        and path.name != "verdicts.py"
        for offences in [results_offences(path)]
        if offences
    }
    assert offenders == {}


LEVEL_RULES = {"level_change", "readiness", "health_criteria", "demotion_criteria", "sampled", "window_sample"}
"""The level criteria and the one at-risk / demote / promote rule: defined only in relay/levels."""


def level_offences(path: Path) -> list[str]:
    """Outside relay/levels nobody defines a level rule or compares with a criterion's threshold
    (`PASS_RATE_MIN`, `TIMEOUT_RATE_MAX`, …): they call relay.levels.criteria's functions."""
    tree = ast.parse(path.read_text())
    offences = [f"defines {n.name}" for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in LEVEL_RULES]
    offences += [
        f"uses the threshold {node.attr if isinstance(node, ast.Attribute) else node.id}"
        for node in ast.walk(tree)
        if (isinstance(node, ast.Attribute) and node.attr in LEVEL_THRESHOLDS)
        or (isinstance(node, ast.Name) and node.id in LEVEL_THRESHOLDS)
    ]
    return offences


LEVEL_THRESHOLDS = {"PASS_RATE_MIN", "TIMEOUT_RATE_MAX", "E2E_P50_MAX", "QUEUE_AVG_MAX", "OVERRUN_RATE_MAX"}


def test_only_relay_levels_applies_the_level_criteria():
    offenders = {
        str(path.relative_to(ROOT)): offences
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and (ROOT / "relay" / "levels") not in path.parents
        for offences in [level_offences(path)]
        if offences
    }
    assert offenders == {}


def test_a_page_judging_a_criterion_itself_is_caught(tmp_path):
    page = tmp_path / "selectors_x.py"
    page.write_text(
        "from relay.levels.criteria import PASS_RATE_MIN\n\ndef level_change(rate):\n    return rate < PASS_RATE_MIN\n"
    )
    assert level_offences(page) == ["defines level_change", "uses the threshold PASS_RATE_MIN"]


def test_a_page_deciding_a_jobs_kind_itself_is_caught(tmp_path):
    page = tmp_path / "pr_blame.py"
    page.write_text("def failure_kind(subject, reference):\n    return 'shared'\n")
    assert results_offences(page) == ["defines failure_kind"]


def test_a_page_combining_job_states_itself_is_caught(tmp_path):
    page = tmp_path / "selectors_x.py"
    page.write_text("from relay.policy.verdicts import cell_state\n\ndef streaks(project):\n    return []\n")
    assert results_offences(page) == ["imports cell_state from relay.policy.verdicts", "defines streaks"]


def test_a_deferred_import_back_into_another_package_is_a_circle():
    modules = {
        "relay": (None, True),
        "relay.intake": (None, True),
        "relay.intake.deliveries": (None, False),
        "relay.dispatch": (None, True),
        "relay.dispatch.fan_out": (None, False),
    }
    sources = {
        "relay": "",
        "relay.intake": "",
        "relay.dispatch": "",
        "relay.intake.deliveries": "from ..dispatch.fan_out import dispatches_create\n",
        "relay.dispatch.fan_out": "def resend():\n    from ..intake.deliveries import webhook_intake\n",
    }
    assert circles(unit_graph(modules, sources)) == [["relay.dispatch", "relay.intake"]]


# --- the HUD reads through its read modules ---------------------------------------------------------

HUD_ENTRY_POINTS = ("hud.views", "hud.templatetags", "hud.urls", "hud.rendering")
"""Modules that answer requests or format values: they hold no query."""
PURE_RELAY = (
    "relay.policy.verdicts",
    "relay.policy.testids",
    "relay.inputs.params",
    "relay.policy.run_links",
    "relay.policy.links",
)
"""The status policy, test identity, the reading of numbers in URLs, the hosts a CI provider
owns and the HUD's own addresses: functions over rows or values already read, no database."""
RELAY_SERVICES = (
    "relay.registry.service",
    "relay.registry.allowlist",
    "relay.triage.issues",
    "relay.triage.expectations",
    "relay.triage.matching",
    "relay.triage.mutes",
    "relay.notify.subscriptions",
)
"""Writes that validate and record who did them (and the errors they raise): a form or an API call
may change the relay's facts only through these."""
RELAY_SELECTORS = ("relay.selectors", "relay.notify.selectors")
"""The relay's reads for the API (the merge gate's verdict is one)."""
READ_MODELS = ("relay.results", "relay.levels", "relay.stats", "relay.tallies", "relay.health.exposition")
"""Cells, the baseline, culprits, the known-issue join and how states show (results); level
criteria and status (levels); what counts and its windows (stats); the tallies; the /metrics text: the read
models every page, the API, the gate and the notifications read through."""


def is_results_read_model(module: str) -> bool:
    """The read models pages and the API may import."""
    return any(module == model or module.startswith(model + ".") for model in READ_MODELS)


def is_hud_entry_point(module: str) -> bool:
    return any(module == entry or module.startswith(entry) for entry in HUD_ENTRY_POINTS)


def entry_point_offences(module: str, source: str, modules: dict) -> list[str]:
    """What an entry point may not do: import a relay module other than the pure policy and the
    write services (so no model to query), import the ORM's query building (django.db.models), or
    touch a manager (`.objects`)."""
    tree = ast.parse(source)
    allowed = {"relay", *PURE_RELAY, *RELAY_SERVICES}
    offences = [
        f"imports {target}"
        for target in sorted(imports_in(module, source, modules))
        if target.split(".")[0] == "relay" and target not in allowed and not is_results_read_model(target)
    ]
    offences += [f"imports {name}" for name in sorted(imported_modules_in(tree)) if name.startswith("django.db.models")]
    offences += [
        f"line {node.lineno}: .objects"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "objects"
    ]
    return offences


def imported_modules_in(tree) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_hud_views_and_template_tags_read_the_database_only_through_the_read_modules():
    modules = product_modules()
    offenders = {
        name: offences
        for name, (path, _) in modules.items()
        if is_hud_entry_point(name)
        for offences in [entry_point_offences(name, path.read_text(), modules)]
        if offences
    }
    assert offenders == {}


def test_a_view_that_queries_a_model_is_caught():
    modules = {
        "hud": (None, True),
        "hud.views_x": (None, False),
        "relay": (None, True),
        "relay.models": (None, True),
        "relay.policy.verdicts": (None, False),
    }
    source = "from relay.models import JobRun\nfrom relay.policy.verdicts import State\n\ndef v(request):\n    return JobRun.objects.count()\n"
    assert entry_point_offences("hud.views_x", source, modules) == ["imports relay.models", "line 5: .objects"]


def test_a_template_tag_building_a_query_is_caught():
    modules = {"hud": (None, True), "hud.templatetags": (None, True), "hud.templatetags.t": (None, False)}
    assert entry_point_offences("hud.templatetags.t", "from django.db.models import Q\n", modules) == [
        "imports django.db.models"
    ]


# --- the API calls selectors and services -----------------------------------------------------------

API_MAY_USE = {
    "hud": lambda module: module.startswith("hud.selectors_") or module == "hud",
    "relay": lambda module: (
        module in ("relay", "relay.models", *PURE_RELAY, *RELAY_SERVICES, *RELAY_SELECTORS)
        or is_results_read_model(module)
    ),
}
"""What an API view may import from the HUD and the relay. HUD: its selectors. Relay: its
selectors, the results read model, its services (and their errors), the pure policy, and the
models, whose managers an API view may name only as a DRF viewset's declared queryset."""


def api_view_offences(module: str, source: str, modules: dict) -> list[str]:
    tree = ast.parse(source)
    offences = [
        f"imports {target}"
        for target in sorted(imports_in(module, source, modules))
        if target.split(".")[0] in API_MAY_USE and not API_MAY_USE[target.split(".")[0]](target)
    ]
    declared = {id(node) for holder in ast.walk(tree) for node in ast.walk(holder) if _declares_a_queryset(holder)}
    offences += [
        f"line {node.lineno}: .objects outside a declared queryset"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "objects" and id(node) not in declared
    ]
    return offences


def _declares_a_queryset(node) -> bool:
    """`queryset = Model.objects…` in a class body, or a viewset's `get_queryset` method."""
    if isinstance(node, ast.Assign):
        return any(isinstance(target, ast.Name) and target.id == "queryset" for target in node.targets)
    return isinstance(node, ast.FunctionDef) and node.name == "get_queryset"


def test_the_api_views_call_only_selectors_and_services():
    modules = product_modules()
    offenders = {
        name: offences
        for name, (path, _) in modules.items()
        if name.startswith("api.views")
        for offences in [api_view_offences(name, path.read_text(), modules)]
        if offences
    }
    assert offenders == {}


def test_an_api_view_reaching_into_hud_internals_or_querying_directly_is_caught():
    modules = {
        "api": (None, True),
        "api.views_x": (None, False),
        "hud": (None, True),
        "hud.views_grid": (None, False),
        "hud.selectors_grid": (None, False),
        "relay": (None, True),
        "relay.models": (None, True),
        "relay.intake": (None, True),
    }
    source = (
        "from hud.selectors_grid import pr_page\nfrom hud.views_grid import grid\nfrom relay.intake import deliveries\n"
        "from relay.models import Project\n\nclass V:\n    queryset = Project.objects.all()\n\n"
        "def f():\n    return Project.objects.first()\n"
    )
    assert api_view_offences("api.views_x", source, modules) == [
        "imports hud.views_grid",
        "imports relay.intake",
        "line 10: .objects outside a declared queryset",
    ]


# --- the trail stays greppable ----------------------------------------------------------------------

HIDDEN_HOPS = {
    "django.dispatch": "a Django signal",
    "django.utils.module_loading": "a call by dotted name (import_string)",
}
"""What hides the path from a writer to what follows it: "find callers" stops at a signal or a
dotted-name lookup. Writers call relay.follow_up and name their tasks instead."""


def hidden_hops(source: str) -> list[str]:
    return [f"{name}: {why}" for name, why in HIDDEN_HOPS.items() if name in imported_modules_in(ast.parse(source))]


def test_the_product_hides_no_hop_behind_a_signal_or_a_dotted_name():
    offenders = {
        name: hops for name, (path, _) in product_modules().items() for hops in [hidden_hops(path.read_text())] if hops
    }
    assert offenders == {}


def test_a_signal_receiver_is_caught():
    source = "from django.dispatch import receiver\nfrom django.utils.module_loading import import_string\n"
    assert hidden_hops(source) == [
        "django.dispatch: a Django signal",
        "django.utils.module_loading: a call by dotted name (import_string)",
    ]


# --- the hallway and the wings ----------------------------------------------------------------------

HALLWAY_MODULES = 14
"""relay's top level holds the app's own files (apps, urls, views, tasks, …), not concerns."""


def test_relay_s_top_level_holds_at_most_a_handful_of_modules():
    assert len(list((ROOT / "relay").glob("*.py"))) <= HALLWAY_MODULES


def test_every_relay_wing_has_a_front_door_that_says_what_it_holds():
    silent = [
        wing
        for wing in relay_wings()
        if wing not in ("relay.migrations", "relay.management", "relay.templatetags")
        and not ast.get_docstring(ast.parse((ROOT / wing.replace(".", "/") / "__init__.py").read_text()))
    ]
    assert silent == []


# --- one meaning per name ---------------------------------------------------------------------------

SAME_MEANING = {
    "Command": "Django's name for every management command",
    "short_sha": "the template filter that hands relay.policy.links.short_sha to templates",
    "commit_path": "the template filter that hands relay.policy.links.commit_path to templates",
    "page_of": "the template filter that hands hud.paging.page_of to templates",
}
"""Names defined in more than one module on purpose: each copy means the one thing."""


def public_definitions() -> dict[str, list[str]]:
    """Every public module-level class and function of the product, by name: where each is defined."""
    found: dict[str, list[str]] = {}
    for top in ("relay", "hud", "api"):
        for path in (ROOT / top).rglob("*.py"):
            if "migrations" not in path.parts:
                for node in ast.parse(path.read_text()).body:
                    if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and not node.name.startswith("_"):
                        found.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    return found


def test_no_public_name_is_defined_twice_with_two_meanings():
    """`find definition` of a name leads to one place; a second `Streak` or `PatternError` that
    means something else sends a reader to the wrong rule."""
    twice = {name: where for name, where in public_definitions().items() if len(where) > 1}
    assert {name: where for name, where in twice.items() if name not in SAME_MEANING} == {}
