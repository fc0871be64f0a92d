"""Where one callback's milliseconds go, measured inside the web server under the benchmark's load.

With CRCR_BENCH_STAGES=1 (`manage.py bench --stages`) the benchmark's web server wraps the
callback path's steps, by the names the product calls them through, in timers that add up this
thread's CPU and the wall time of each step; the benchmark-only URL bench/stages
(devtools/bench/urls.py) answers one web process's totals and resets them. The product is
untouched: the wrappers exist only in benchmark processes, and each costs ~2 µs.

A stage is inclusive of the stages listed under it; the report subtracts them, so every
millisecond is counted once: "request" is everything inside Django's handler (its own time: the
middleware, URL resolution and the answer's JSON), "callback service" relay.callbacks.receive,
"state machine" the job's step (its own time: on SQLite, and on PostgreSQL for what one statement
did not apply, the transaction's BEGIN and COMMIT), "one statement" PostgreSQL's common step, and
"job step" the job row's statements inside a transaction."""

import importlib
import os
import threading
import time
from functools import wraps

_totals: dict[str, list[int]] = {}
_lock = threading.Lock()

# (stage, module, attribute, parent stage). Each attribute is a module global (or a class's method,
# "Class.method") its caller looks up at call time, so patching it works whenever the URL confs
# were imported.
STAGES = (
    ("body read", "relay.views", "body_within", "request"),
    ("callback service", "relay.views", "callback_receive", "request"),
    ("body parse (JSON)", "relay.callbacks.receive", "body_parse", "callback service"),
    ("OIDC verify", "relay.callbacks.receive", "token_verify", "callback service"),
    ("project lookup", "relay.callbacks.receive", "project_for_token", "callback service"),
    # On Redis the rate limit's INCR is sent first and its reply read after the report and the
    # dispatch (relay/callbacks/ratelimit.py): the wait in between is theirs.
    ("rate limit (sent)", "relay.callbacks.receive", "rate_limit_asked", "callback service"),
    ("rate limit (answer)", "relay.callbacks.ratelimit", "RateQuestion.decision", "callback service"),
    ("report read", "relay.callbacks.receive", "report_read", "callback service"),
    ("callback_token", "relay.callbacks.receive", "binding_read", "callback service"),
    # Only where the one statement did not apply (SQLite, a refusal, a sweeper's row): a new
    # row's dispatch, or a completion's whose row was not there.
    ("dispatch lookup", "relay.callbacks.receive", "dispatch_for", "callback service"),
    ("state machine", "relay.callbacks.receive", "job_record", "callback service"),
    ("job change (its values)", "relay.callbacks.receive", "_job_change", "state machine"),
    # On PostgreSQL the common step: the row and the token in one statement, its own transaction
    # (relay/callbacks/job_rows.py: change_with_token); what it does not apply takes "job step".
    ("one statement (job + token)", "relay.callbacks.job_rows", "change_with_token", "state machine"),
    ("job step (transaction)", "relay.callbacks.receive", "_job_step", "state machine"),
    ("token insert", "relay.callbacks.receive", "_token_consumed", "job step (transaction)"),
    ("follow-up enqueue", "relay.follow_up", "react_on_commit", "state machine"),
    # What react_on_commit registered runs at COMMIT: the task's publish to the broker.
    ("follow-up publish (at commit)", "relay.checks.tasks", "_react", "state machine"),
)
ORDER = ("request",) + tuple(s[0] for s in STAGES)


def _add(stage: str, cpu: int, wall: int) -> None:
    with _lock:
        row = _totals.setdefault(stage, [0, 0, 0])
        row[0] += cpu
        row[1] += wall
        row[2] += 1


def timed(stage: str, function):
    @wraps(function)
    def wrapper(*args, **kwargs):
        cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
        try:
            return function(*args, **kwargs)
        finally:
            _add(stage, time.thread_time_ns() - cpu, time.perf_counter_ns() - wall)

    return wrapper


class StageMiddleware:
    """The outermost middleware: everything Django does for a request, under "request"."""

    def __init__(self, get_response):
        install()
        self.get_response = timed("request", get_response)

    def __call__(self, request):
        return self.get_response(request)


def install() -> None:
    """Wrap every stage, once per process (each handler's middleware asks)."""
    for stage, module_name, attribute, _parent in STAGES:
        owner, name = owner_of(module_name, attribute)
        original = getattr(owner, name)
        if not getattr(original, "_bench_stage", False):
            wrapper = timed(stage, original)
            wrapper._bench_stage = True
            setattr(owner, name, wrapper)


def owner_of(module_name: str, attribute: str) -> tuple[object, str]:
    """(what holds the stage's function: its module or a class of it, the function's name)."""
    owner = importlib.import_module(module_name)
    *path, name = attribute.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, name


def report_take() -> dict:
    """This process's raw totals ({stage: [cpu_ns, wall_ns, calls]}) since the last take, then reset."""
    with _lock:
        totals = {k: list(v) for k, v in _totals.items()}
        _totals.clear()
    return {"pid": os.getpid(), "totals": totals}


def merged(takes: list[dict]) -> dict[str, list[int]]:
    """The totals of several processes' takes (each gunicorn worker keeps its own)."""
    out: dict[str, list[int]] = {}
    for take in takes:
        for stage, values in take["totals"].items():
            row = out.setdefault(stage, [0, 0, 0])
            for i, value in enumerate(values):
                row[i] += value
    return out


def per_request(totals: dict[str, list[int]]) -> dict:
    """{stage: {calls, cpu_ms, wall_ms, self_cpu_ms, self_wall_ms}}, each per "request"; a stage's
    self time leaves out the stages under it."""
    requests = max(totals.get("request", [0, 0, 0])[2], 1)
    children: dict[str, list[str]] = {}
    for stage, _module, _attribute, parent in STAGES:
        children.setdefault(parent, []).append(stage)

    def ms(ns: int) -> float:
        return round(ns / requests / 1e6, 3)

    out = {}
    for stage in ORDER:
        cpu, wall, calls = totals.get(stage, [0, 0, 0])
        kids = [totals.get(k, [0, 0, 0]) for k in children.get(stage, [])]
        out[stage] = {
            "calls": calls,
            "cpu_ms": ms(cpu),
            "wall_ms": ms(wall),
            "self_cpu_ms": ms(cpu - sum(k[0] for k in kids)),
            "self_wall_ms": ms(wall - sum(k[1] for k in kids)),
        }
    return {"requests": requests, "stages": out}
