"""`manage.py structure graph [PACKAGE]`, `manage.py structure crossings PATH` and `manage.py
structure answers OUTDIR [--at ISO]`: measures of the layering that docs/architecture.md describes,
for before/after figures of a move, and the API's answers, for proof that a move changed none.

* **graph**: PACKAGE's import graph (default `hud`), subpackages collapsed into one module each
  (`relay.tallies.*` is `relay.tallies`): the modules that import or are imported by another one of
  the package, the layers (the longest import chain) and the edges (imports deferred into
  functions count; an import of a module's member counts as one of the module).
* **crossings**: one GET of PATH in this process, on the configured database, under
  `sys.setprofile`: each distinct (caller, callee) pair of functions where a call goes from `hud`
  into `relay` (down) or from `relay` back into `hud` (up, through a callable handed down).
* **answers**: every /api/v1 GET route (and the schema) asked in this process, on the configured
  database, with the clock frozen at `--at` (default: the next whole minute after the store's
  newest written row); one OUTDIR/<slug>.txt per answer (status line, content type, body) and
  OUTDIR/index.txt. Two runs on the same store write the same bytes; a "moves only" change must
  too."""

import ast
import gc
import hashlib
import json
import logging
import random
import re
import sys
import types
from contextlib import contextmanager
from datetime import UTC, timedelta
from pathlib import Path
from urllib.parse import quote, unquote, urlencode, urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Measure a package's import graph, or the hud↔relay call crossings of one page."

    def add_arguments(self, parser):
        parser.add_argument("what", choices=["graph", "crossings", "answers"])
        parser.add_argument(
            "target", nargs="?", default="hud", help="graph: a package; crossings: a path; answers: OUTDIR"
        )
        parser.add_argument("--at", help="answers: the frozen clock, ISO 8601 (default: just after the newest row)")

    def handle(self, *args, what: str, target: str, **options):
        if what == "answers":
            answers_write(Path(target), options["at"], self.stdout)
        elif what == "graph":
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


# --- the answers of the API ------------------------------------------------------------------------

PAGE_SIZE = 2
"""A cursor list is asked whole, then PAGE_SIZE at a time: page 1 and the page its `next` names."""
FEW = 4
"""Detail routes are asked for this many real ids of each kind (the newest, and the oldest)."""


def answers_write(outdir: Path, at: str | None, out) -> None:
    from django.db import transaction

    moment = _instant(at) if at else _after_newest_row()
    outdir.mkdir(parents=True, exist_ok=True)
    for old in outdir.glob("*.txt"):
        old.unlink()
    with _frozen_clock(moment), _plain_static(), _quiet_refusals(), transaction.atomic():
        answers = _Answers(outdir)
        _ask_every_route(answers.get, moment)
        transaction.set_rollback(True)  # the readers' tokens and whatever a GET fills lazily: the store stays
    (outdir / "index.txt").write_text("".join(f"{line}\n" for line in answers.index), encoding="utf-8")
    routes = _api_route_names()
    out.write(
        f"answers at {moment.isoformat()}: {len(answers.index)} answers over {len(answers.names & routes)} "
        f"of the {len(routes)} API routes, in {outdir}"
    )
    if routes - answers.names:
        out.write(f"  routes never asked (no such rows in the store): {', '.join(sorted(routes - answers.names))}")


def _instant(text: str):
    from django.utils.dateparse import parse_datetime

    moment = parse_datetime(text)
    if moment is None or moment.tzinfo is None:
        raise CommandError(f"--at {text!r}: give an ISO 8601 instant with its offset, e.g. 2026-12-07T09:40:00Z")
    return moment.astimezone(UTC)


def _after_newest_row():
    """The next whole minute after the newest write stamp (`auto_now` or `default=timezone.now`)
    of the relay's rows: the store as it was just after it was written, whatever it holds."""
    from django.apps import apps
    from django.db.models import DateTimeField, Max
    from django.utils import timezone

    newest = []
    for model in apps.get_app_config("relay").get_models():
        stamps = [
            f.name
            for f in model._meta.concrete_fields
            if isinstance(f, DateTimeField) and (f.auto_now or f.auto_now_add or f.default is timezone.now)
        ]
        if stamps:
            newest += [t for t in model.objects.aggregate(*[Max(f) for f in stamps]).values() if t]
    if not newest:
        raise CommandError("the store holds no rows: give --at")
    return (max(newest) + timedelta(minutes=1)).replace(second=0, microsecond=0).astimezone(UTC)


@contextmanager
def _frozen_clock(moment):
    """timezone.now answers `moment` wherever it is held (module globals, `from … import now`, a
    dataclass's default_factory, a field's default), and the tallies' compute budget never runs
    out, as no time passes (else a slow machine answers "loading" where a fast one answers figures)."""
    from django.utils import timezone

    real, frozen = timezone.now, lambda: moment
    budgets = {m: m.COMPUTE_BUDGET_SECONDS for m in _own_modules() if hasattr(m, "COMPUTE_BUDGET_SECONDS")}
    _swap(real, frozen)
    for module in budgets:
        module.COMPUTE_BUDGET_SECONDS = float("inf")
    try:
        yield
    finally:
        _swap(frozen, real)
        for module, budget in budgets.items():
            module.COMPUTE_BUDGET_SECONDS = budget


def _plain_static():
    """Static files by their plain names: the docs page's links do not depend on whether, and
    with which packages, collectstatic ran in this tree."""
    from django.test.utils import override_settings

    plain = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
    return override_settings(STORAGES={**settings.STORAGES, "staticfiles": plain})


@contextmanager
def _quiet_refusals():
    """The 4xx asked on purpose are no news in the log; a 5xx still is."""
    log = logging.getLogger("django.request")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _own_modules() -> list:
    return [m for name, m in list(sys.modules.items()) if name.split(".")[0] in ("relay", "hud", "api")]


def _swap(old, new) -> None:
    """Every dict value and closure cell holding `old` holds `new` instead. Plain loops: a
    comprehension would make `old` a cell of this function, and swap it too."""
    for holder in gc.get_referrers(old):
        if isinstance(holder, dict):
            for key, value in list(holder.items()):
                if value is old:
                    holder[key] = new
        elif isinstance(holder, types.CellType):
            holder.cell_contents = new


class _Answers:
    """Each GET on an empty cache and a seeded random generator, so no answer depends on the
    ones before it; written as OUTDIR/<slug>.txt."""

    def __init__(self, outdir: Path):
        self.outdir, self.clients = outdir, _clients()
        self.index: list[str] = []
        self.names: set[str] = set()
        self.slugs: set[str] = set()

    def get(self, path: str, who: str = "public", paged: bool = False):
        from django.core.cache import cache
        from django.urls import Resolver404, resolve

        cache.clear()
        random.seed(0)
        response = self.clients[who].get(path)
        body = b"".join(response.streaming_content) if response.streaming else response.content
        slug = self._slug(path, who)
        head = f"{response.status_code} {response.reason_phrase}\nContent-Type: {response.get('Content-Type', '')}\n\n"
        (self.outdir / f"{slug}.txt").write_bytes(head.encode() + body)
        self.index.append(f"{slug}\t{who}\tGET {path}")
        try:
            self.names.add(resolve(urlsplit(path).path).url_name)
        except Resolver404:
            pass
        data = json.loads(body) if response.get("Content-Type", "").startswith("application/json") else None
        if paged:
            following = (self.get(_q(path, page_size=PAGE_SIZE), who) or {}).get("next")
            if following:
                self.get(_local(following), who)
        return data

    def _slug(self, path: str, who: str) -> str:
        slug = re.sub(r"[^A-Za-z0-9._=-]+", "_", unquote(path).removeprefix("/api/")).strip("_")
        slug = (slug if who == "public" else f"{slug}.{who}")[:150]
        if len(slug) == 150 or slug in self.slugs:
            slug = f"{slug[:140]}.{hashlib.sha256(f'{who} {path}'.encode()).hexdigest()[:8]}"
        self.slugs.add(slug)
        return slug


def _local(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def _clients() -> dict:
    """Public reads anonymously; operator data (deliveries, dispatches) with a `read` token, as a
    reader's script asks; subscriptions with an admin's token, who sees every one."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from api.models import ApiToken, Scope

    users = get_user_model()
    reader = users.objects.create_user("structure-answers-reader")
    admin = users.objects.create_superuser("structure-answers-admin", "", None)
    host = settings.ALLOWED_HOSTS[0] if settings.ALLOWED_HOSTS else "localhost"
    clients = {"public": Client(HTTP_HOST=host)}
    for who, user, scope in (("reader", reader, Scope.READ), ("admin", admin, Scope.ADMIN)):
        _, raw = ApiToken.issue(user, f"structure answers ({who})", [scope])
        clients[who] = Client(HTTP_HOST=host, HTTP_AUTHORIZATION=f"Bearer {raw}")
    return clients


def _api_route_names() -> set[str]:
    from django.urls import URLPattern, URLResolver, get_resolver

    def walk(patterns, prefix: str):
        for p in patterns:
            route = prefix + str(p.pattern).lstrip("^")
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, route)
            elif isinstance(p, URLPattern) and route.startswith("api/") and p.name:
                yield p.name

    return set(walk(get_resolver().url_patterns, ""))


V1 = "/api/v1"


def _ask_every_route(ask, moment) -> None:
    """Every GET route: lists bare, by their main filters and a page at a time; details for real
    ids of the store (the newest few and the oldest). `ask(path, who, paged)` answers the JSON."""
    _store_wide(ask, moment)
    for name in _few("Project", "full_name", newest_first=False, count=None):
        _backend(ask, name)
    _commits(ask)
    for number in _pr_numbers():
        _pr(ask, number)
    _details(ask)
    _tests(ask)
    _refusals(ask)


def _q(route: str, /, **params) -> str:
    """The route with these query parameters added."""
    return route + ("&" if "?" in route else "?") + urlencode(params) if params else route


def _store_wide(ask, moment) -> None:
    for path in (f"{V1}/", "/api/schema/", "/api/docs/", f"{V1}/allowlist", f"{V1}/enablement", f"{V1}/level-status"):
        ask(path)
    for window in ("", "24h", "7d", "14d", "30d", "90d", "1y"):
        ask(_q(f"{V1}/quality", range=window))
    iso = {"since": _iso(moment - timedelta(days=1)), "until": _iso(moment)}
    for path, filters in (
        ("projects", [{"level": "L4"}, {"active": "true"}, {"is_reference": "true"}]),
        ("jobs", [{"status": "completed"}, {"conclusion": "failure"}, {"ended_by": "timed_out"}, {"level": "L4"}]),
        ("jobs", [{"event_type": "nightly"}, iso]),
        ("commits", [{"is_trunk": "true"}, {"is_trunk": "false"}]),
        ("known-issues", [{"state": "open"}, {"state": "resolved"}]),
        ("mutes", [{"active": "true"}, {"active": "false"}]),
    ):
        _listed(ask, f"{V1}/{path}", filters)
    _listed(ask, f"{V1}/deliveries", [{"event": "pull_request"}, {"event": "push"}], who="reader")
    _listed(ask, f"{V1}/dispatches", [{"state": s} for s in _few("Dispatch", "state", count=None)], who="reader")
    _listed(ask, f"{V1}/subscriptions", [], who="admin")
    ask(f"{V1}/deliveries")  # refused: operator data
    ask(f"{V1}/subscriptions", "reader")  # a reader's own: none
    for params in ({}, {"days": "90"}, {"kind": "reason"}, {"kind": "missing_operator"}, {"shared": "yes"}):
        ask(_q(f"{V1}/causes", **params))
    ask(_q(f"{V1}/causes", limit=1))
    bisections = ask(f"{V1}/bisections") or {}
    for params in [{"limit": "1"}] + [{"state": s} for s in _few("Bisection", "state", count=None)]:
        ask(_q(f"{V1}/bisections", **params))
    culprits = [b["result"]["culprit_sha"] for b in bisections.get("bisections", []) if b["result"]["culprit_sha"]]
    for sha in culprits[:1]:
        ask(_q(f"{V1}/bisections", culprit=sha))


def _iso(moment) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _listed(ask, path: str, filters: list[dict], who: str = "public") -> None:
    ask(path, who, paged=True)
    for params in filters:
        ask(_q(path, **params), who)


def _backend(ask, name: str) -> None:
    project = f"{V1}/projects/{name}"
    for path in (project, f"{project}/expectations", f"{project}/expectations?as=text"):
        ask(path)
    enablement = ask(f"{V1}/enablement/{name}") or {}
    for params in [{"path": "autograd"}] + [{"variant": v} for v in enablement.get("variants", [])[:2]]:
        ask(_q(f"{V1}/enablement/{name}", **params))
    for path, key in (("culprits", "backend"), ("level-status", "repo"), ("quality", "backend"), ("jobs", "backend")):
        ask(_q(f"{V1}/{path}", **{key: name}))
    for path in ("mutes", "causes", "bisections"):
        ask(_q(f"{V1}/{path}", backend=name))
    ask(_q(f"{V1}/dispatches", repo=name), "reader")


def _commits(ask) -> None:
    trunk = _few("UpstreamCommit", "sha", is_trunk=True)
    heads = _few("UpstreamCommit", "sha", is_trunk=False, count=2)
    for sha in trunk + heads:
        ask(f"{V1}/commits/{sha}")
        ask(f"{V1}/commits/{sha}/baseline")
        ask(_q(f"{V1}/jobs", sha=sha))
    for sha in (trunk + heads)[:1]:
        ask(f"{V1}/commits/{sha[:7]}")
        ask(_q(f"{V1}/deliveries", sha=sha), "reader")
        ask(_q(f"{V1}/dispatches", sha=sha), "reader")
    for name in _few("Project", "full_name", newest_first=False, count=None, active=True) if trunk else ():
        ask(_q(f"{V1}/culprits", backend=name, sha=trunk[-1]))  # the oldest trunk commit: a fixed point


def _pr_numbers() -> list[int]:
    numbers = set(_few("UpstreamCommit", "pr_number", count=None)) | set(_few("JobRun", "pr_number", count=None))
    ordered = sorted(numbers)
    return sorted(set(ordered[-(FEW - 1) :] + ordered[:1]))


def _pr(ask, number: int) -> None:
    ask(f"{V1}/prs/{number}")
    ask(f"{V1}/prs/{number}/gate")
    for sha in _few("UpstreamCommit", "sha", pr_number=number, newest_first=False, count=1):
        ask(_q(f"{V1}/prs/{number}/gate", sha=sha))
    ask(_q(f"{V1}/jobs", pr=number))
    ask(_q(f"{V1}/commits", pr=number))
    ask(_q(f"{V1}/deliveries", pr=number), "reader")
    ask(_q(f"{V1}/dispatches", pr=number), "reader")


def _details(ask) -> None:
    jobs = _few("JobRun", "id") + _few("JobRun", "id", count=1, failed_tests__isnull=False)
    jobs += _few("JobRun", "id", count=1, ended_by="timed_out") + _few("JobRun", "id", count=1, run_attempt__gt=1)
    for pk in dict.fromkeys(jobs):
        ask(f"{V1}/jobs/{pk}")
        ask(f"{V1}/jobs/{pk}/failed-tests")
    for guid in _few("Delivery", "guid"):
        ask(f"{V1}/deliveries/{guid}", "reader")
    for pk in _few("Dispatch", "id"):
        ask(f"{V1}/dispatches/{pk}", "reader")
    for pk in _few("KnownIssue", "id"):
        ask(f"{V1}/known-issues/{pk}")
        ask(f"{V1}/known-issues/{pk}/occurrences", paged=True)
    for pk in _few("Subscription", "id"):
        ask(f"{V1}/subscriptions/{pk}", "admin")
        ask(f"{V1}/subscriptions/{pk}/notifications", "admin", paged=True)
    for pk in _few("FailureCause", "id"):
        ask(f"{V1}/causes/{pk}")
    for pk in _few("Bisection", "id"):
        ask(f"{V1}/bisections/{pk}")
    for pk in _few("TestMute", "id", count=1):
        ask(f"{V1}/mutes/{pk}/extend")  # POST only: the 405s say the routes are still there
        ask(f"{V1}/mutes/{pk}/lift")


def _tests(ask) -> None:
    muted = _few("TestMute", "identity__identity", count=2)
    for identity in dict.fromkeys(muted + _few("TestIdentity", "identity")):
        history = f"{V1}/tests/{quote(identity, safe='')}/history"
        ask(history)
        ask(_q(history, limit=2), paged=True)
    for identity in muted[:1]:
        ask(_q(f"{V1}/mutes", test_id=identity))


def _refusals(ask) -> None:
    """A few answers to bad input: a move must not change what a client is told either."""
    for path in (f"{V1}/jobs/999999999999", f"{V1}/prs/999999999", f"{V1}/causes/999999999", f"{V1}/bisections/9999"):
        ask(path)
    for path in (_q(f"{V1}/jobs", bogus=1), _q(f"{V1}/causes", days=0), _q(f"{V1}/bisections", state="nope")):
        ask(path)
    ask(f"{V1}/tests/no.such.Test.test_x/history")
    ask(f"{V1}/culprits")
    for name in _few("Project", "full_name", newest_first=False, count=1):
        ask(_q(f"{V1}/enablement/{name}", path="no-such-path"))
        ask(f"{V1}/projects/{name}/level")  # POST only: the 405s say the routes are still there
        ask(f"{V1}/projects/{name}/deactivate")


def _few(model: str, field: str, newest_first: bool = True, count: int | None = FEW, **where) -> list:
    """`field` of relay's `model`, distinct and not empty, by id (newest first, or oldest): the
    first count-1 and the last; all when count is None."""
    from django.apps import apps

    rows = apps.get_model("relay", model).objects.filter(**where).order_by("-id" if newest_first else "id")
    first = _distinct(rows.values_list(field, flat=True), count)
    if count is None or count == 1 or len(first) < count:
        return first
    return list(dict.fromkeys(first[: count - 1] + _distinct(rows.reverse().values_list(field, flat=True), 1)))


def _distinct(values, limit: int | None) -> list:
    found: dict = {}
    for value in values.iterator(chunk_size=500):
        if value not in (None, ""):
            found[value] = None
            if limit is not None and len(found) == limit:
                break
    return list(found)
