"""The callback's CPU per request, against its floor and against another git revision, measured
alternately in one run (`manage.py bench --against REV`; docs/performance.md, "The floor and the
regression guard").

A rate on a shared host moves with the host: its other users take the CPU, its speed swings
between minutes. A ratio of two CPU costs measured in the same minutes does not. So each revision
is served by a probe process of its own (this file run as a script with the revision's tree on
its path: its own Django, its own SQLite store, its own GitHub stand-in for the OIDC keys) that
sends callbacks through the exact WSGI application gunicorn serves in the benchmark
(devtools.bench.wsgi: the machine handler and its middleware), in process, and times each
request with this thread's CPU clock. Each request of a callback is followed by the same body
to the empty view behind the same handler (devtools/bench/urls.py: the floor), so the floor is
measured in the same moments as the callback. The parent asks the probes for rounds in turn
(A B B A …), so a change of host speed falls on both revisions alike, and prints per revision
the callback's CPU, the floor's, and their ratio; and the two revisions' ratio.

The probe uses only what both revisions have (devtools.bench.figures.CallbackWorld, the
stand-in, the WSGI application); a revision from before those existed cannot be measured."""

import io
import json
import os
import select
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
PROBE_SCRIPT = Path(__file__).resolve()
"""What each probe runs: this very file (see probe_main)."""
BASELINE_REV = "a388c88"
"""The regression guard's revision when the repository has no tag: the turn before issue 55's
14 % regression (docs/performance.md), the last one measured against the public relay."""
CALLBACK_PATH = "/github/callback"
FLOOR_PATH = "/bench/floor"
ANSWER_TIMEOUT = 300.0
"""How long the parent waits for a probe's answer (setup migrates a fresh store) before giving up."""
MARKS_ENV = "CRCR_BENCH_CALLGRIND_MARKS"
"""The compiled callgrind marks a counting probe loads (devtools.bench.instructions)."""
COUNTED_ENV = {"PYTHONHASHSEED": "0", "CRCR_REGISTRY_CACHE_SECONDS": "0"}
"""What a counting probe fixes so that its count repeats: a set's order (the hash seed), and the
project lookup's 5 s memory (relay/callbacks/identity.py), which an instrumented probe, ~50×
slower, would outlive on some callbacks and not others. With none, every callback looks its
project up, as many do in production, where a repository's callbacks are often minutes apart
(docs/performance.md, "seventh round")."""
COUNTED_TIMEOUT = 1200.0
"""The same under callgrind, where the probe's setup runs ~10× slower and a counted round ~50×."""


# --- pure pieces (tests/test_bench_cost.py) ---------------------------------------------------------


def against_default(git) -> str:
    """The revision to compare with when none is named: the newest tag reachable from HEAD, else
    BASELINE_REV. `git(*args)` answers git's stdout, or None when git failed."""
    tag = git("describe", "--tags", "--abbrev=0", "HEAD")
    return tag.strip() if tag and tag.strip() else BASELINE_REV


def environ(path: str, body: bytes, token: str | None) -> dict:
    """A WSGI environ as gunicorn builds it for a JSON POST to 127.0.0.1."""
    env = {
        "REQUEST_METHOD": "POST",
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "8000",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_HOST": "127.0.0.1",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "http",
        "wsgi.errors": sys.stderr,
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
    }
    if token is not None:
        env["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return env


@dataclass
class Costs:
    """One revision's samples: CPU nanoseconds per request, callback and floor, over its rounds."""

    label: str
    rev: str
    callback_ns: list[int] = field(default_factory=list)
    floor_ns: list[int] = field(default_factory=list)
    round_ratios: list[float] = field(default_factory=list)
    errors: int = 0

    def add(self, answer: dict) -> None:
        self.callback_ns += answer["callback_ns"]
        self.floor_ns += answer["floor_ns"]
        self.errors += answer["errors"]
        if answer["callback_ns"] and answer["floor_ns"]:
            self.round_ratios.append(median(answer["callback_ns"]) / median(answer["floor_ns"]))

    def summary(self) -> dict:
        """Medians in ms, and the callback/floor ratio: the median of each round's ratio (each
        round's two medians come from the same seconds)."""
        cb = median(self.callback_ns) / 1e6 if self.callback_ns else None
        fl = median(self.floor_ns) / 1e6 if self.floor_ns else None
        ratio = median(self.round_ratios) if self.round_ratios else None
        pairs = [c / f for c, f in zip(self.callback_ns, self.floor_ns, strict=True) if f]
        return {
            "rev": self.rev,
            "requests": len(self.callback_ns),
            "callback_cpu_ms": round(cb, 4) if cb is not None else None,
            "floor_cpu_ms": round(fl, 4) if fl is not None else None,
            "ratio_to_floor": round(ratio, 3) if ratio is not None else None,
            "round_ratios": [round(r, 3) for r in self.round_ratios],
            "pair_ratio": round(median(pairs), 3) if pairs else None,
            # The medians leave out what one callback in ten pays (a follow-up's publish, a WAL
            # checkpoint); the means carry it, as the benchmark's web CPU does.
            "callback_mean_ms": round(sum(self.callback_ns) / len(self.callback_ns) / 1e6, 4) if cb else None,
            "floor_mean_ms": round(sum(self.floor_ns) / len(self.floor_ns) / 1e6, 4) if fl else None,
            "errors": self.errors,
        }


def verdicts(summaries: dict[str, dict], this: str, other: str | None) -> list[str]:
    """The printed lines: each revision's callback CPU, the empty view's, their ratio and the
    relay's own share (the difference); then this revision's ratio against the other's. In
    process there is no gunicorn under either, so the ratio is larger than the gunicorn figure
    that make bench judges against devtools.bench.figures.FLOOR_GOAL (callback_floor_ratio); it is the one to compare
    between revisions."""
    lines = []
    for label, s in summaries.items():
        own = None
        if s["callback_cpu_ms"] is not None and s["floor_cpu_ms"] is not None:
            own = round(s["callback_cpu_ms"] - s["floor_cpu_ms"], 4)
        lines.append(
            f"{label:>8} {_short(s['rev']):<13} callback {s['callback_cpu_ms']} ms CPU, empty view "
            f"{s['floor_cpu_ms']} ms, the relay's own {own} ms: {s['ratio_to_floor']}× the empty view; "
            f"{s['requests']} requests, {s['errors']} errors{_means(s)}"
        )
    if other and summaries.get(other, {}).get("ratio_to_floor") and summaries[this]["ratio_to_floor"]:
        change = summaries[this]["ratio_to_floor"] / summaries[other]["ratio_to_floor"] - 1
        lines.append(
            f"callback ÷ empty view, {_short(summaries[this]['rev'])} against {_short(summaries[other]['rev'])}: {change:+.1%}"
        )
    return lines


def _means(summary: dict) -> str:
    """The means beside the medians, when the summary has them (an older cost.json may not)."""
    if summary.get("callback_mean_ms") is None or summary.get("floor_mean_ms") is None:
        return ""
    return f"; means {summary['callback_mean_ms']} and {summary['floor_mean_ms']} ms"


def _short(rev: str) -> str:
    """A SHA at 12 characters, keeping the mark of a tree with uncommitted changes ("+")."""
    return rev[:12] + ("+" if rev.endswith("+") and len(rev) > 12 else "")


# --- the parent: a worktree per revision, probes asked in turn ---------------------------------------


def git(*args: str, cwd: Path = ROOT) -> str | None:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    return done.stdout if done.returncode == 0 else None


class Probe:
    """One revision's probe process; `ask` sends a round and waits (with a timeout) for its answer."""

    def __init__(
        self,
        label: str,
        tree: Path,
        store: Path,
        script: Path = PROBE_SCRIPT,
        database_url: str = "",
        marks: Path | None = None,
    ):
        """With `marks` (the compiled callgrind marks, devtools.bench.instructions), the probe runs
        under callgrind and can count its requests' instructions (`count`)."""
        from devtools.bench.harness import SECRET_KEY  # absolute: the probe runs this file as a script

        shutil.rmtree(store, ignore_errors=True)  # a fresh store, migrated by this revision
        store.mkdir(parents=True)
        database_url = database_url or f"sqlite:///{store.resolve() / 'cost.sqlite3'}"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CRCR_", "REDIS_URL", "DATABASE_"))}
        env.update(
            {
                "PYTHONPATH": str(Path(tree).resolve()),
                "DJANGO_SETTINGS_MODULE": "devtools.bench.settings",
                "DATABASE_URL": database_url,
                "CRCR_VAR_DIR": str(store.resolve()),
                "SECRET_KEY": SECRET_KEY,
                "DEBUG": "0",
                "CRCR_SANDBOX": "0",
                "PYTHONUNBUFFERED": "1",
            }
        )
        prefix: list[str] = []
        self.counts_to = store.resolve() / "callgrind.out"
        self.timeout = ANSWER_TIMEOUT
        if marks is not None:
            from devtools.bench.instructions import valgrind_argv

            prefix = valgrind_argv(self.counts_to)
            env.update({MARKS_ENV: str(marks), **COUNTED_ENV})
            self.timeout = COUNTED_TIMEOUT
        self.label = label
        self.log = open(store / "probe.log", "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, str(script)],
            cwd=tree,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            start_new_session=True,
        )
        self.ready: dict | None = None

    def wait_ready(self) -> dict:
        """The probe's first line, once its store is migrated (probes start side by side)."""
        try:
            self.ready = self._read()
        except Exception:
            self.close()
            raise
        return self.ready

    def ask(self, pairs: int, modules: int = 0, count: str = "") -> dict:
        question = {"pairs": pairs, **({"modules": modules} if modules else {}), **({"count": count} if count else {})}
        self.proc.stdin.write((json.dumps(question) + "\n").encode())
        self.proc.stdin.flush()
        return self._read()

    def count(self, pairs: int, side: str, modules: int = 0) -> int:
        """The instructions `pairs` jobs' requests of `side` ("callback" or "floor") executed, each
        completion counting `modules` modules: a round in which only those requests are counted,
        read back from the dump it ends with."""
        from devtools.bench.instructions import dump_total

        answer = self.ask(pairs, modules=modules, count=side)
        if answer["errors"]:
            raise RuntimeError(f"the {self.label} probe's counted round had {answer['errors']} errors")
        return dump_total(self.counts_to, answer["dumps"])

    def _read(self) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline() if ready else b""
        if not line:
            raise RuntimeError(f"the {self.label} probe did not answer (its log: {self.log.name})")
        return json.loads(line)

    def close(self) -> None:
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        if self.proc.poll() is None:
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.log.close()


def worktree(rev: str, base: Path) -> tuple[Path, str]:
    """A detached worktree of `rev` under `base` (made once per commit), and the commit's SHA."""
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    if not sha:
        raise ValueError(f"no such revision: {rev}")
    sha = sha.strip()
    tree = base / f"tree-{sha[:12]}"
    for stale in base.glob("tree-*"):  # one worktree kept: each guarded commit would add one
        if stale != tree:
            git("worktree", "remove", "--force", str(stale.resolve()))
    if not (tree / "manage.py").exists():
        git("worktree", "prune")
        if git("worktree", "add", "--detach", "--force", str(tree), sha) is None:
            raise RuntimeError(f"git worktree add {rev} failed")
    return tree, sha


def pg_database(server_url: str, name: str) -> str:
    """A fresh PostgreSQL database `name` on the server of `server_url` (dropped first); its URL."""
    from devtools.bench.harness import Target, _pg_admin

    url = urlunsplit(urlsplit(server_url)._replace(path=f"/{name}"))
    target = Target(name, url, "postgresql", None, "")
    _pg_admin(target, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    return url


def compare(
    against: str | None,
    rounds: int,
    pairs: int,
    base: Path,
    log=print,
    postgres: str = "",
    modules: int = 0,
    counted_pairs: int = 0,
) -> dict:
    """This tree's callback cost and `against`'s (None: this tree alone), alternately; the summaries.
    With `postgres` (a server's URL) each probe gets a database of its own there, crcr_cost_<label>,
    instead of a SQLite file. With `modules`, then the goal-5 A/B on this tree's probe (`capabilities`),
    under the summaries' "capabilities". With `counted_pairs`, then each revision's instructions
    per request (`instruction_counts`), under "instructions"."""
    labels = {
        "this": (ROOT, (git("rev-parse", "HEAD") or "?").strip() + ("+" if git("diff", "--quiet") is None else ""))
    }
    if against:
        labels["against"] = worktree(against, base)
    summaries = _timed(labels, rounds, pairs, base, log, postgres, modules)
    if counted_pairs:
        summaries["instructions"] = instruction_counts(labels, counted_pairs, base, log, postgres, modules)
    return summaries


def _timed(labels: dict, rounds: int, pairs: int, base: Path, log, postgres: str, modules: int) -> dict:
    from devtools.bench.paired import alternated  # the parent's only: a probe runs in an older tree

    probes, costs = {}, {}
    try:
        for label, (tree, rev) in labels.items():
            log(f"cost: starting the {label} probe ({rev[:12]}, {tree})")
            database = pg_database(postgres, f"crcr_cost_{label}") if postgres else ""
            probes[label] = Probe(label, tree, base / f"store-{label}", database_url=database)
            costs[label] = Costs(label, rev)
        for probe in probes.values():
            probe.wait_ready()
        for probe in probes.values():
            probe.ask(pairs)  # untimed warm-up: the first requests' imports, keys and caches
        for label in alternated(list(probes), rounds):
            costs[label].add(probes[label].ask(pairs))
        carrying = capabilities(probes["this"], rounds, pairs, modules) if modules else None
    finally:
        for probe in probes.values():
            probe.close()
    summaries = {label: c.summary() for label, c in costs.items()}
    for line in verdicts(summaries, "this", "against" if "against" in labels else None):
        log(line)
    if carrying is not None:
        summaries["capabilities"] = carrying
        log(capabilities_verdict(carrying, summaries.get("against", {}).get("rev")))
    return summaries


def instruction_counts(labels: dict, pairs: int, base: Path, log=print, postgres: str = "", modules: int = 0) -> dict:
    """Each revision's instructions per callback and per empty view, counted under callgrind by a
    probe of its own (devtools.bench.instructions): the guard's figure that no host speed moves.
    With `modules`, then goal 5's A/B in instructions on this tree's probe: the same callbacks,
    each completion counting that many modules (under "capabilities"). Empty ({"skipped": why})
    on a machine without valgrind or a C compiler."""
    from devtools.bench import instructions

    try:
        marks = instructions.marks_library(base)
    except instructions.Unavailable as exc:
        log(f"instructions: not counted: {exc}")
        return {"skipped": str(exc)}
    log(f"instructions: {pairs} callback pairs per revision under callgrind (its setup takes minutes)")
    probes, counted = {}, {}
    try:
        for label, (tree, rev) in labels.items():
            database = pg_database(postgres, f"crcr_counted_{label}") if postgres else ""
            probes[label] = Probe(label, tree, base / f"counted-{label}", database_url=database, marks=marks)
        for probe in probes.values():
            probe.wait_ready()
        for label, probe in probes.items():
            probe.ask(pairs)  # uncounted warm-up, as in the timed rounds
            callback, floor = probe.count(pairs, "callback"), probe.count(pairs, "floor")
            counted[label] = {"rev": labels[label][1], **instructions.summary(callback, floor, 2 * pairs)}
            if modules and label == "this":
                carrying = probe.count(pairs, "callback", modules)
                counted["capabilities"] = instructions.capabilities(callback, carrying, pairs, modules)
    finally:
        for probe in probes.values():
            probe.close()
    revisions = {label: c for label, c in counted.items() if label != "capabilities"}
    for line in instructions.verdicts(revisions, "this", "against" if "against" in revisions else None, _short):
        log(line)
    if "capabilities" in counted:
        log(instructions.capabilities_verdict(counted["capabilities"], counted["this"]))
    return counted


# --- goal 5: what the new capabilities add to the callback that carries them ------------------------


CAPABILITY_GOAL_MS = 2.0
"""Module counts (enablement) and failure causes add at most this much CPU to a callback that
carries them (issue 55, goal 5); to one that does not, nothing (the guard's own figure)."""
AB_MODULES = 1100
"""The A/B's module counts: one job counting every file of PyTorch's test/ (about 1,100), the
most a real job sends (relay/callbacks/body.py caps it at MAX_MODULES, 2,000)."""


def capabilities(probe: "Probe", rounds: int, pairs: int, modules: int) -> dict:
    """The same completions without and with `modules` module counts, in turn on one probe
    (A B, B A, …): each one's CPU (the in_progress callbacks carry none), and what the counts add:
    the median over rounds of the difference of a round's median from its partner's. The failure
    causes are clustered from the failures already stored, in the test store's sweep: no callback
    carries anything new for them."""
    from devtools.bench.paired import alternated  # the parent's only, as in compare

    samples: dict[str, list[int]] = {"without": [], "with": []}
    medians: dict[str, list[int]] = {"without": [], "with": []}
    errors = 0
    for label in alternated(["without", "with"], rounds):
        answer = probe.ask(pairs, modules=modules if label == "with" else 0)
        completions = answer["callback_ns"][1::2]  # each job's completion, after its in_progress
        samples[label] += completions
        medians[label].append(median(completions))
        errors += answer["errors"]
    added = [(w - o) / 1e6 for w, o in zip(medians["with"], medians["without"], strict=True)]
    return {
        "modules": modules,
        "completions": len(samples["with"]),
        "without_ms": round(median(samples["without"]) / 1e6, 4),
        "with_ms": round(median(samples["with"]) / 1e6, 4),
        "added_ms": round(median(added), 4),
        "round_added_ms": [round(a, 4) for a in added],
        "errors": errors,
        "goal_ms": CAPABILITY_GOAL_MS,
        "met": median(added) <= CAPABILITY_GOAL_MS and not errors,
    }


def capabilities_verdict(carrying: dict, against_rev: str | None) -> str:
    met = "met" if carrying["met"] else "missed"
    without = f"; without them, the guard's line above against {_short(against_rev)}" if against_rev else ""
    return (
        f"capabilities (goal 5): a completion counting {carrying['modules']:,} modules {carrying['with_ms']} ms CPU, "
        f"the same without {carrying['without_ms']} ms: +{carrying['added_ms']} ms "
        f"[{met}: ≤ {carrying['goal_ms']:g} ms], {carrying['errors']} errors{without}"
    )


# --- the probe (this file run as a script, the revision's tree first on sys.path) --------------------


def probe_main() -> None:
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
    from devtools.standin import StandIn

    standin = StandIn().start()
    os.environ["CRCR_OIDC_ISSUERS"] = json.dumps(standin.oidc.issuers_config())
    from django.core.management import call_command

    from devtools.bench.wsgi import application  # sets Django up with devtools.bench.settings

    call_command("migrate", verbosity=0)
    from devtools.bench.figures import CallbackWorld

    world = CallbackWorld(_World(standin))
    marks = _Marks(os.environ[MARKS_ENV]) if os.environ.get(MARKS_ENV) else None
    _say({"ready": True})
    for line in sys.stdin:
        question = json.loads(line)
        jobs = world.jobs(question["pairs"])
        counting = question.get("count", "")
        answer = _round(application, jobs, question.get("modules", 0), marks.counting(counting) if counting else None)
        if counting:
            answer["dumps"] = marks.dump(counting)
        _say(answer)
    standin.stop()


class _Marks:
    """Callgrind's client requests through the compiled marks (devtools.bench.instructions):
    instrumentation from the first counted round on, collection toggled around each counted
    request, and a dump at the end of the round."""

    def __init__(self, library: str):
        import ctypes

        self.lib = ctypes.CDLL(library)
        self.instrumented = False
        self.dumps = 0
        self.side = ""

    def counting(self, side: str) -> "_Marks":
        if not self.instrumented:
            self.lib.crcr_start()
            self.instrumented = True
        self.side = side
        return self

    def toggle(self, side: str) -> None:
        if side == self.side:
            self.lib.crcr_toggle()

    def dump(self, name: str) -> int:
        """Write this round's counts as the next dump, and answer its number."""
        self.lib.crcr_dump(name.encode())
        self.dumps += 1
        return self.dumps


class _World:
    """What CallbackWorld needs of the benchmark: the stand-in that mints the OIDC tokens."""

    def __init__(self, standin):
        self.standin = standin


def _round(application, jobs, modules: int = 0, marks: "_Marks | None" = None) -> dict:
    """Each job's in_progress then completed (counting `modules` modules), each followed by the
    same body to the empty view; with `marks`, the instructions of one side's requests counted."""
    callback_ns, floor_ns, errors = [], [], 0
    for job in jobs:
        job.modules = modules
        for status, token in (("in_progress", job.tokens[0]), ("completed", job.tokens[1])):
            body = job.body(status)
            spent, ok = _request(application, CALLBACK_PATH, body, token, status, marks, "callback")
            callback_ns.append(spent)
            errors += not ok
            spent, ok = _request(application, FLOOR_PATH, body, token, "floor", marks, "floor")
            floor_ns.append(spent)
            errors += not ok
    return {"callback_ns": callback_ns, "floor_ns": floor_ns, "errors": errors}


def _request(
    application, path: str, body: bytes, token: str, expect: str, marks: "_Marks | None" = None, side: str = ""
) -> tuple[int, bool]:
    """(this thread's CPU for one request through the WSGI application, answered as expected);
    its instructions collected when `marks` counts `side`."""
    answered = {}

    def start_response(status, headers, exc_info=None):
        answered["status"] = status

    request = environ(path, body, token)
    if marks:
        marks.toggle(side)
    started = time.thread_time_ns()
    chunks = application(request, start_response)
    payload = b"".join(chunks)
    if hasattr(chunks, "close"):
        chunks.close()
    spent = time.thread_time_ns() - started
    if marks:
        marks.toggle(side)
    ok = answered.get("status", "").startswith("200") and json.loads(payload).get("status") == expect
    return spent, ok


def _say(document: dict) -> None:
    sys.stdout.write(json.dumps(document) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    probe_main()
