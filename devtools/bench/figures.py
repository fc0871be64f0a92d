"""One function per figure of docs/performance.md. Each measures on the client side, checks the
answers (status and content), and records medians and ratios measured in the same run."""

import itertools
import json
import os
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from .harness import STAGES_ENV, WEBHOOK_SECRET, MachineWatch, Services, peak_rss_mb, rss_mb
from .load import (
    UPSTREAM,
    UPSTREAM_ID,
    CallbackJob,
    Client,
    callback_prefix,
    head_sha,
    median,
    ms,
    percentile,
    pr_payload,
    webhook_headers,
)

FLOOR_GOAL = 2.0
"""The callback's CPU per request at most this many times the empty view's (issue 55); the
regression guard (devtools.bench.cost) measures the same ratio against an earlier revision."""
CALLBACK_RATE_LIMIT = 1_000_000
"""rate_limit_per_min of the callback benchmark's projects: the per-repo default (100/min) would
refuse most of a 450/s run spread over 40 repos. The limiter itself still runs on every call."""
LEVEL_PATTERN = [
    "L2",
    "L4",
    "L1",
    "L3",
    "L2",
    "L1",
    "L2",
    "L3",
    "L1",
    "L2",
    "L1",
    "L4",
    "L2",
    "L1",
    "L3",
    "L2",
    "L1",
    "L2",
    "L1",
    "L1",
]
"""Registered repos at the mix we expect as the relay grows (10 % L4, 15 % L3, 35 % L2, 40 % L1);
any prefix of it is a plausible registry (the first 8: 1 × L4, 2 × L3, 3 × L2, 2 × L1)."""


@dataclass(frozen=True)
class Profile:
    name: str
    small_jobs: int
    large_jobs: int
    page_commits: int
    intake_rounds: int
    intake_per_round: int
    intake_warmup: int
    fanout_n: int
    fanout_trials: int
    callback_seconds: float
    callback_clients: int
    page_samples: int
    page_warmup: int
    summary_samples: int
    summary_gap: float
    summary_cold_timeout: float
    fanout_large_n: int = 200
    """Goal 4's larger fan-out (0: not measured, as in the tiny profile)."""
    floor_pairs: int = 5
    floor_round_seconds: float = 2.0
    """The floor's turns (callback_floor): this many pairs of rounds this long."""


PROFILES = {
    "full": Profile("full", 10_000, 1_000_000, 50, 4, 100, 10, 50, 5, 30.0, 8, 15, 3, 20, 3.5, 300.0),
    "quick": Profile("quick", 10_000, 100_000, 50, 2, 50, 5, 50, 3, 10.0, 8, 8, 2, 8, 1.0, 180.0),
    "tiny": Profile(
        "tiny",
        3_000,
        8_000,
        15,
        1,
        20,
        3,
        50,
        1,
        3.0,
        8,
        3,
        1,
        3,
        0.2,
        90.0,
        fanout_large_n=0,
        floor_pairs=2,
        floor_round_seconds=1.0,
    ),
}


@dataclass
class Result:
    key: str
    label: str
    value: float | None
    unit: str
    target: str = ""
    verdict: str = "info"  # met | missed | info | n/a
    status: str = "measured"
    details: dict = field(default_factory=dict)


class Bench:
    """What the figures share: the profile, the running services, the stand-in, the results."""

    def __init__(self, profile: Profile, services: Services, standin, log=print):
        self.profile, self.services, self.standin, self.log = profile, services, standin, log
        self.results: list[Result] = []
        self.store: dict = {"jobs": 0}
        self.watch = MachineWatch(services)
        self.machine: dict | None = None
        self.unjudged = ""
        """Why the times and rates added now are not judged (their targets shown, no verdict), or
        "". A count that must be 0 (errors, lost callbacks) is judged whatever the reason."""

    def begin(self) -> None:
        """A figure starts: note how busy the machine is, to report it with the figure."""
        self.watch.begin()
        self.machine = None

    def add(self, key, label, value, unit, target="", ok=None, status="measured", **details) -> Result:
        if self.unjudged and ok is not None and target != "0":
            ok, status = None, self.unjudged
        verdict = "n/a" if value is None else "info" if ok is None else "met" if ok else "missed"
        if self.machine is None:
            self.machine = self.watch.report()
        result = Result(key, label, value, unit, target, verdict, status, {**details, "machine": self.machine})
        self.results.append(result)
        shown = "—" if value is None else f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"
        self.log(
            f"  {label}: {shown} {unit}{'' if verdict == 'info' else f'  [{verdict}: {target}]'}{'' if status == 'measured' else f'  ({status})'}"
        )
        return result

    def unavailable(self, key, label, unit, target, reason) -> Result:
        return self.add(key, label, None, unit, target, status=reason)

    @property
    def base_url(self) -> str:
        return self.services.base_url


def cpu_delta(before: dict, after: dict) -> dict:
    """CPU seconds each part used between two MachineWatch.cpu() samples, process by process (a
    process that started in between counts from zero; one that ended in between is lost)."""
    return {
        name: sum(max(0.0, secs - before.get(name, {}).get(pid, 0.0)) for pid, secs in pids.items())
        for name, pids in after.items()
    }


def cpu_per(total: dict, count: int) -> dict:
    """CPU milliseconds per request, by part. `server` = web + db + worker: what the relay spent,
    including work it handed to the Celery worker (check-run reactions) during the measurement."""
    if not count:
        return {}
    out = {
        name: round(1000 * seconds / count, 2)
        for name, seconds in total.items()
        if name in ("web", "db", "worker", "bench")
    }
    out["server"] = round(out.get("web", 0) + out.get("db", 0) + out.get("worker", 0), 2)
    return out


# --- projects ------------------------------------------------------------------------------------


def projects_ensure(
    prefix: str,
    count: int,
    *,
    repo_id_base: int,
    levels=None,
    rate_limit=None,
    installation_id=None,
    standin=None,
    installation_each=False,
):
    """`count` registered repos named `<prefix>-NNN/pytorch-ci`, at the LEVEL_PATTERN mix unless
    `levels` is given; installed (as the hourly sync would record it) when `installation_id` is set:
    all on that installation, or with `installation_each` each on its own (installation_id + i),
    as backends of different organisations are."""
    from relay.models import Installation, InstalledRepo, Project, RelayState

    wanted = []
    for i in range(count):
        level = levels or LEVEL_PATTERN[i % len(LEVEL_PATTERN)]
        wanted.append(
            Project(
                full_name=f"{prefix}-{i:03d}/pytorch-ci",
                github_repo_id=repo_id_base + i,
                level=level,
                device=f"dev{i}" if level == "L3" else "",
                hardware_kind="gpu",
                display_name=f"{prefix} {i:03d}",
                position=i,
                rate_limit_per_min=rate_limit,
            )
        )
    with transaction.atomic():
        existing = {p.full_name: p for p in Project.objects.filter(full_name__startswith=f"{prefix}-")}
        Project.objects.bulk_create([p for p in wanted if p.full_name not in existing])
        projects = list(Project.objects.filter(full_name__startswith=f"{prefix}-").order_by("full_name"))[:count]
        if installation_id is not None:
            for i, p in enumerate(projects):
                owner = installation_id + i if installation_each else installation_id
                inst, _ = Installation.objects.get_or_create(
                    installation_id=owner, defaults={"account_login": prefix, "repository_selection": "selected"}
                )
                InstalledRepo.objects.get_or_create(
                    full_name=p.full_name, defaults={"repo_id": p.github_repo_id, "installation": inst}
                )
            RelayState.objects.update_or_create(key="installations-synced", defaults={"value": {"bench": True}})
    if standin is not None and installation_id is not None:
        for i, p in enumerate(projects):
            owner = installation_id + i if installation_each else installation_id
            standin.add_installation(owner, prefix)
            standin.add_repo(p.full_name, repo_id=p.github_repo_id, installation_id=owner)
    return projects


def projects_activate(projects) -> None:
    """Exactly these projects are registered (active); every other one is switched off."""
    from relay.models import Project

    with transaction.atomic():
        Project.objects.exclude(pk__in=[p.pk for p in projects]).update(active=False)
        Project.objects.filter(pk__in=[p.pk for p in projects]).update(active=True)


def upstream_install(standin) -> None:
    """The App on pytorch/pytorch too (check runs and the gate are written there)."""
    from relay.models import Installation, InstalledRepo

    standin.add_installation(4_299_999, "pytorch")
    standin.add_repo(UPSTREAM, repo_id=UPSTREAM_ID, installation_id=4_299_999)
    inst, _ = Installation.objects.get_or_create(installation_id=4_299_999, defaults={"account_login": "pytorch"})
    InstalledRepo.objects.get_or_create(full_name=UPSTREAM, defaults={"repo_id": UPSTREAM_ID, "installation": inst})


# --- webhook intake ----------------------------------------------------------------------------------


def intake(b: Bench) -> None:
    """Signed 20 KB pull_request webhooks through gunicorn, one after another, with 8 and with 200
    registered repos, alternating in rounds so both see the same machine. No Celery worker runs
    meanwhile (the fan-out messages queue up and are purged), so the figure is intake alone."""
    p = b.profile
    b.log("webhook intake")
    b.begin()
    projects = projects_ensure("intake", 200, repo_id_base=720_000_000, installation_id=4_200_100)
    client = Client(b.base_url)
    latencies = {8: [], 200: []}
    cpu = {8: {}, 200: {}}
    bad = []
    sequence = itertools.count()

    def send(n: int, record: bool) -> None:
        k = next(sequence)
        body = pr_payload(500_000 + k, head_sha("intake", k), "opened" if k % 3 == 0 else "synchronize")
        reply = client.request("POST", "/github/webhook", body, webhook_headers("pull_request", body, WEBHOOK_SECRET))
        if reply.status != 202 or reply.json().get("dispatches") != n:
            bad.append((n, reply.status, reply.error or reply.body[:200].decode(errors="replace")))
        elif record:
            latencies[n].append(reply.seconds)

    try:
        for r in range(p.intake_rounds):
            for n in (8, 200):
                projects_activate(projects[:n])
                for _ in range(p.intake_warmup):
                    send(n, record=False)
                _mark_sent("intake-")
                before = b.watch.cpu()
                for _ in range(p.intake_per_round):
                    send(n, record=True)
                spent = cpu_delta(before, b.watch.cpu())
                cpu[n] = {k: cpu[n].get(k, 0.0) + v for k, v in spent.items()}
                _mark_sent("intake-")
    finally:
        client.close()
        b.services.purge_broker()
        projects_activate([])
    p50 = {n: median(v) for n, v in latencies.items()}
    p99 = {n: percentile(v, 99) for n, v in latencies.items()}
    details = {
        "requests_per_config": len(latencies[8]),
        "payload_bytes": 20 * 1024,
        "rounds": p.intake_rounds,
        "refused": len(bad),
        "refusals": bad[:5],
        "worker": "stopped (fan-out messages purged, rows marked sent between batches)",
        "level_mix": "10% L4, 15% L3, 35% L2, 40% L1",
    }
    per = {n: cpu_per(cpu[n], len(latencies[n])) for n in (8, 200)}
    for n in (8, 200):
        extra = {
            "p90_ms": ms(percentile(latencies[n], 90)),
            "max_ms": ms(max(latencies[n], default=None)),
            "cpu_ms_per_webhook": per[n],
        }
        b.add(f"intake_p50_{n}", f"webhook intake p50, {n} repos", ms(p50[n]), "ms", "", None, **extra, **details)
        b.add(
            f"intake_p99_{n}",
            f"webhook intake p99, {n} repos",
            ms(p99[n]),
            "ms",
            "≤ 25 ms",
            _le(p99[n], 0.025),
            **details,
        )
    ratio = round(p50[200] / p50[8], 3) if p50[8] and p50[200] else None
    b.add("intake_p50_ratio", "intake p50(200 repos) / p50(8 repos)", ratio, "×", "≤ 1.5", _le(ratio, 1.5))
    for n in (8, 200):
        b.add(
            f"intake_cpu_{n}",
            f"intake server CPU per webhook, {n} repos",
            per[n].get("server"),
            "ms",
            "",
            None,
            **per[n],
        )
    if bad:
        b.log(f"  {len(bad)} webhook(s) not accepted as expected, e.g. {bad[:2]}")


def _mark_sent(prefix: str) -> int:
    """What the stopped worker would have done: the benchmark's pending dispatch rows become sent,
    so the table looks as it does in production (pending rows are transient) and later webhooks'
    queries over pending rows do not slow down with every webhook sent before them."""
    from relay.models import Dispatch

    return Dispatch.objects.filter(project__full_name__startswith=prefix, state__in=Dispatch.OPEN_STATES).update(
        state=Dispatch.State.SENT, attempts=1, sent_at=timezone.now()
    )


# --- fan-out ------------------------------------------------------------------------------------------


def fanout(b: Bench) -> None:
    """Webhook accepted (202) → the stand-in has accepted all N dispatches, each call delayed
    100 ms by the stand-in; then, with the stand-in answering at once, 202 → the first dispatch
    accepted (the relay's own hops: broker, fan-out task, claim). A warm-up delivery first
    (installation token, connections)."""
    p, standin = b.profile, b.standin
    n = p.fanout_n
    b.log(f"fan-out to {n} repos (stand-in latency 100 ms, then 0 ms)")
    upstream_install(standin)
    projects_activate(_fanout_projects(b, n))
    if b.services.worker is None:
        b.services.purge_broker()
        b.services.start_worker()
    client = Client(b.base_url)
    sequence = itertools.count()
    try:
        b.begin()
        standin.set_latency(0.1)
        slow = [_fanout_trial(b, client, next(sequence), n) for _ in range(p.fanout_trials + 1)][1:]  # warm-up
        _fanout_completion_figure(b, slow, n)
        b.begin()
        standin.set_latency(0.0)
        fast = [_fanout_trial(b, client, next(sequence), n) for _ in range(FANOUT_FIRST_TRIALS)]
        _fanout_first_figure(b, fast)
        if p.fanout_large_n:
            _fanout_large(b, client, sequence)
    finally:
        standin.set_latency(0.0)
        client.close()


FANOUT_FIRST_TRIALS = 7
"""Deliveries for the first-dispatch figure (its median): cheap at 0 ms stand-in latency."""
FANOUT_LARGE_TRIALS = 3
PUBLIC_RELAY_FANOUT_S = 5.07
"""The public relay's webhook → all dispatched for 50 backends in 50 organisations, GitHub answering
each call in 100 ms, run locally beside this project (issue 55); goal 4 is a tenth of it."""
FANOUT_SHARE_GOAL = 0.1
FANOUT_LARGE_GOAL_S = 2.5
"""Goal 4: 200 backends, GitHub at 100 ms a call, all dispatched within this."""


def _fanout_projects(b: Bench, n: int):
    """The first `n` fan-out backends, each on its own App installation, as different organisations'
    are: GitHub's write budget is per installation (relay/github/ratelimit.py), and 50 repos of one
    installation would spend it in two deliveries, by design."""
    return projects_ensure(
        "fanout", n, repo_id_base=730_000_000, installation_id=4_200_200, standin=b.standin, installation_each=True
    )


def _fanout_large(b: Bench, client, sequence) -> None:
    """Goal 4's second half: 200 backends in 200 organisations, each call delayed 100 ms; one
    warm-up delivery (their installation tokens), then the median of FANOUT_LARGE_TRIALS."""
    n = b.profile.fanout_large_n
    projects_activate(_fanout_projects(b, n))
    b.begin()
    b.standin.set_latency(0.1)
    trials = [_fanout_trial(b, client, next(sequence), n) for _ in range(FANOUT_LARGE_TRIALS + 1)][1:]
    value = median([t["completion_s"] for t in trials])
    b.add(
        "fanout_completion_large",
        f"fan-out completion, N = {n}",
        round(value, 3),
        "s",
        f"≤ {FANOUT_LARGE_GOAL_S:g} s",
        _le(value, FANOUT_LARGE_GOAL_S),
        trials=trials,
        sequential_bound_s=round(n * 0.1, 1),
        worker=b.services.config.describe()["worker"],
    )


def _fanout_trial(b: Bench, client, k: int, n: int) -> dict:
    """One PR webhook to the N registered repos; returns when every dispatch row reads sent."""
    from relay.models import Dispatch

    standin = b.standin
    delivery = f"bench-fanout-{time.time_ns()}-{k}"
    body = pr_payload(610_000 + k, head_sha("fanout", delivery), "opened")
    with standin.world.lock:
        start = len(standin.world.dispatches)
    posted = time.time()
    reply = client.request(
        "POST", "/github/webhook", body, webhook_headers("pull_request", body, WEBHOOK_SECRET, delivery)
    )
    accepted = time.time()
    if reply.status != 202:
        raise RuntimeError(f"fan-out webhook answered {reply.status}: {reply.body[:300]!r}")
    times = _dispatch_times(standin, start, delivery, n, timeout=60)
    if len(times) < n:
        raise RuntimeError(
            f"only {len(times)} of {n} dispatches reached the stand-in within 60 s\n{b.services.worker.log_tail()}"
        )
    _wait(
        lambda: Dispatch.objects.filter(delivery__guid=delivery, state="sent").count() == n,
        30,
        "dispatch rows marked sent",
    )
    return {
        "completion_s": round(max(times) - accepted, 3),
        "from_post_s": round(max(times) - posted, 3),
        "first_s": round(min(times) - accepted, 3),
        "intake_ms": ms(reply.seconds),
    }


def _fanout_completion_figure(b: Bench, trials: list[dict], n: int) -> None:
    value = median([t["completion_s"] for t in trials])
    goal = round(FANOUT_SHARE_GOAL * PUBLIC_RELAY_FANOUT_S, 2) if n == 50 else 1.0  # the public relay's N
    b.add(
        "fanout_completion",
        f"fan-out completion, N = {n}",
        round(value, 3),
        "s",
        f"≤ {goal:g} s",
        _le(value, goal),
        public_relay_s=PUBLIC_RELAY_FANOUT_S if n == 50 else None,
        ratio_to_public_relay=round(value / PUBLIC_RELAY_FANOUT_S, 3) if n == 50 else None,
        trials=trials,
        sequential_bound_s=round(n * 0.1, 1),
        worker=b.services.config.describe()["worker"],
    )


def _fanout_first_figure(b: Bench, trials: list[dict]) -> None:
    value = median([t["first_s"] for t in trials])
    b.add(
        "fanout_first",
        "webhook answered → first dispatch sent (stand-in at 0 ms)",
        ms(value),
        "ms",
        "≤ 150 ms",
        _le(value, 0.150),
        trials=trials,
        worker=b.services.config.describe()["worker"],
    )


def _dispatch_times(standin, start: int, delivery: str, n: int, timeout: float) -> list[float]:
    deadline = time.monotonic() + timeout
    while True:
        with standin.world.lock:
            times = [
                d["at"] for d in standin.world.dispatches[start:] if d["client_payload"].get("delivery_id") == delivery
            ]
        if len(times) >= n or time.monotonic() > deadline:
            return times
        time.sleep(0.01)


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


# --- callbacks -----------------------------------------------------------------------------------------


class CallbackWorld:
    """40 L2 repos, 10 PR deliveries dispatched to each, and jobs answering them."""

    REPOS = 40
    DELIVERIES = 10

    def __init__(self, b: Bench):
        from relay.callbacks.tokens import CallbackBinding, callback_token_sign
        from relay.models import Delivery, Dispatch

        self.b = b
        self.projects = projects_ensure(
            "cb", self.REPOS, repo_id_base=740_000_000, levels="L2", rate_limit=CALLBACK_RATE_LIMIT
        )
        projects_activate(self.projects)
        now = timezone.now()
        self.prefixes = {}
        self.guids: list[str] = []
        with transaction.atomic():
            for d in range(self.DELIVERIES):
                number, sha = 620_000 + d, head_sha("callbacks", d, time.time_ns())
                body = pr_payload(number, sha, "synchronize")
                delivery = Delivery.objects.create(
                    guid=f"bench-cb-{time.time_ns()}-{d}",
                    event="pull_request",
                    action="synchronize",
                    outcome="relayed",
                    repo_full_name=UPSTREAM,
                    pr_number=number,
                    head_sha=sha,
                    payload=json.loads(body),
                    payload_bytes=len(body),
                )
                self.guids.append(delivery.guid)
                Dispatch.objects.bulk_create(
                    Dispatch(
                        delivery=delivery,
                        project=p,
                        state="sent",
                        event_type="pull_request",
                        pr_number=number,
                        head_sha=sha,
                        attempts=1,
                        sent_at=now - timedelta(seconds=60),
                    )
                    for p in self.projects
                )
                for p in self.projects:
                    token = callback_token_sign(CallbackBinding(delivery.guid, p.full_name, number, sha))
                    self.prefixes[(d, p.pk)] = callback_prefix("pull_request", delivery.guid, body, token)
        self.next_index = 0

    def jobs(self, count: int) -> list[CallbackJob]:
        """`count` fresh jobs, two freshly minted OIDC tokens each (a token's jti carries one callback)."""
        made = []
        for k in range(self.next_index, self.next_index + count):
            project = self.projects[k % self.REPOS]
            d = (k // self.REPOS) % self.DELIVERIES
            run_id = str(50_000_000 + k)
            job = CallbackJob(
                self.prefixes[(d, project.pk)],
                project.full_name,
                run_id,
                f"test (default, {k % 8 + 1}, 8)",
                "failure" if k % 10 == 0 else "success",
            )
            job.index = k
            job.tokens = [
                self.b.standin.oidc.mint(
                    repository=project.full_name,
                    repository_id=str(project.github_repo_id),
                    lifetime=1800,
                    run_id=run_id,
                )
                for _ in range(2)
            ]
            made.append(job)
        self.next_index += count
        return made


def callback_run(
    b: Bench,
    jobs: list[CallbackJob],
    seconds: float,
    clients: int,
    path: str = "/github/callback",
    base_url: str | None = None,
) -> dict:
    """`clients` threads, each with its own keep-alive connection, each sending its jobs'
    in_progress then completed callbacks until the time is up. To `path` = the floor view, the
    same requests are answered by an empty view (the answer's status is then "floor")."""
    floor = path != "/github/callback"
    lanes = [jobs[i::clients] for i in range(clients)]
    records: list[list] = [[] for _ in range(clients)]
    exhausted = []
    barrier = threading.Barrier(clients + 1)
    state = {}

    def lane(i: int) -> None:
        client = Client(base_url or b.base_url)
        out = records[i]
        barrier.wait()
        deadline = state["deadline"]
        try:
            for job in lanes[i]:
                if time.perf_counter() >= deadline:
                    return
                for status, token in (("in_progress", job.tokens[0]), ("completed", job.tokens[1])):
                    reply = client.request(
                        "POST",
                        path,
                        job.body(status),
                        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
                    )
                    answer = reply.json().get("status") if reply.status == 200 else None
                    answer = status if floor and answer == "floor" else answer
                    out.append(
                        (
                            job.index,
                            status,
                            reply.status,
                            reply.seconds,
                            answer == status,
                            reply.error or (None if answer == status else reply.body[:200]),
                        )
                    )
                    if answer != status:
                        break
            exhausted.append(i)
        finally:
            state.setdefault("ends", []).append(time.perf_counter())
            client.close()

    threads = [
        threading.Thread(target=lane, args=(i,), name=f"bench-callback-{i}", daemon=True) for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    state["deadline"] = time.perf_counter() + seconds
    started = time.perf_counter()
    barrier.wait()
    for thread in threads:
        thread.join(timeout=seconds + 120)
    elapsed = max(state.get("ends", [time.perf_counter()])) - started
    flat = [r for lane_records in records for r in lane_records]
    accepted = [r for r in flat if r[4]]
    errors = [r for r in flat if not r[4]]
    return {
        "elapsed": elapsed,
        "records": flat,
        "accepted": len(accepted),
        "errors": errors,
        "exhausted": sorted(exhausted),
        "latencies": [r[3] for r in flat],
    }


def callback_targets() -> tuple[float, float]:
    """(accepted per second, p99 in seconds) that the issues set for this configuration:
    PostgreSQL + Redis (issue 55, goal 3: eight clients), or the embedded defaults (SQLite,
    embedded broker, local cache)."""
    from django.conf import settings
    from django.db import connection

    if connection.vendor == "postgresql" and settings.REDIS_URL:
        return 1000.0, 0.030
    return 200.0, 0.100


PUBLIC_RELAY_CALLBACKS_PER_S = 332.0
"""The public relay's best rate, one client, in_progress + completed pairs, run locally with an
in-memory Redis and no HUD forward (so it stores nothing): docs/performance.md, "The public relay"."""


def public_relay_target() -> float:
    """How many times the public relay's rate one client must reach here: 1.5 on the default
    install, 1.2 on PostgreSQL + Redis (the callback issue)."""
    from django.conf import settings
    from django.db import connection

    return 1.2 if connection.vendor == "postgresql" and settings.REDIS_URL else 1.5


CALLBACK_CPU_TARGET_MS = 4.0
"""CPU per accepted L2 callback, every server process (web + database + worker)."""


def callbacks(b: Bench) -> None:
    """OIDC-verified callbacks (in_progress + completed pairs) from 8 concurrent clients; every
    accepted one is then checked in the database. Then the same requests to an empty view behind
    the same middleware: the floor of Django's request cycle."""
    from relay.models import UsedToken

    p = b.profile
    b.log(f"callbacks: {p.callback_clients} clients for {p.callback_seconds:.0f} s")
    # The fan-out before it leaves the follow-up worker its check-run reactions and writes for a
    # while: measured over them, the callbacks' web CPU read 2.55 ms where it read 1.9 alone.
    b.log(f"  waited {servers_quiet(b)} s for the servers to finish the previous figure's work")
    world = CallbackWorld(b)
    warm_jobs = world.jobs(160)
    warm = callback_run(b, warm_jobs, 2.0, p.callback_clients)
    rate = warm["accepted"] / max(warm["elapsed"], 0.1)
    b.log(
        f"  warm-up: {warm['accepted']} accepted in {warm['elapsed']:.1f} s ({rate:.0f}/s), {len(warm['errors'])} errors"
    )
    count = jobs_for(rate, p.callback_seconds)  # 2.5 × the warm-up's pace
    started = time.monotonic()
    jobs = world.jobs(count)
    b.log(f"  minted {2 * count:,} OIDC tokens in {time.monotonic() - started:.1f} s")
    stages_on = os.environ.get(STAGES_ENV) == "1"
    if stages_on:
        _stages_take(b)  # the warm-up's
        # The timers run inside every callback and in no empty view's request (the floor ratio read
        # 4.9x with them where it read 3.1x without): what they measure is where the time goes.
        b.unjudged = "not judged: stage timers on"
    b.begin()
    before = b.watch.cpu()
    run = callback_run(b, jobs, p.callback_seconds, p.callback_clients)
    b.machine = b.watch.report()
    per = cpu_per(cpu_delta(before, b.watch.cpu()), run["accepted"])
    if stages_on:
        _callback_stages_figure(b, per)
    lost, extra, checked = _callbacks_stored(world, jobs, run["records"])
    tokens_used = UsedToken.objects.count()
    expected_tokens = warm["accepted"] + run["accepted"]
    _callback_figures(b, run, jobs, world)
    b.add(
        "callback_not_stored",
        "accepted callbacks missing from the database",
        lost,
        "callbacks",
        "0",
        lost == 0 and tokens_used == expected_tokens,
        checked=checked,
        rows_without_accepted_callback=extra,
        used_tokens=tokens_used,
        used_tokens_expected=expected_tokens,
    )
    _callback_cpu_figure(b, per)
    callback_floor(b, world, jobs, run["accepted"] / run["elapsed"])
    callback_one_client(b, world, rate)
    b.unjudged = ""
    if run["exhausted"]:
        b.log(
            f"  note: {len(run['exhausted'])} client(s) ran out of pre-minted jobs before the end; throughput is a lower bound"
        )


def _stages_take(b: Bench) -> dict:
    """Every web process's stage totals (each answer comes from one gunicorn worker and resets it;
    asking a few times per worker over fresh connections reaches them all)."""
    from devtools.bench.stages import merged
    from devtools.bench.urls import STAGES_PATH

    takes = []
    for _ in range(6 * b.services.config.web_workers):
        client = Client(b.base_url)
        try:
            reply = client.get(f"/{STAGES_PATH}")
        finally:
            client.close()
        if reply.status == 200:
            takes.append(reply.json())
    return merged(takes)


def _callback_stages_figure(b: Bench, per: dict) -> None:
    """Where a callback's web CPU goes, step by step (docs/performance.md, "Where each millisecond goes")."""
    from devtools.bench.stages import per_request

    report = per_request(_stages_take(b))
    inside = report["stages"]["request"]["cpu_ms"]
    outside = round(per.get("web", 0) - inside, 3) if per.get("web") else None
    b.log(f"  stages (CPU / wall per request, self time; {report['requests']:,} requests):")
    for stage, row in report["stages"].items():
        b.log(f"    {stage:<30} {row['self_cpu_ms']:7.3f} ms CPU  {row['self_wall_ms']:7.3f} ms wall")
    b.log(f"    {'gunicorn + WSGI (web − request)':<30} {outside} ms CPU")
    b.add(
        "callback_stages",
        "callback: CPU inside Django's handler per request (stages in details)",
        inside,
        "ms",
        outside_django_cpu_ms=outside,
        web_cpu_ms=per.get("web"),
        **report,
    )


QUIET_CPU_SHARE = 0.05
"""The relay's processes are quiet when they use less than this share of one core."""
QUIET_TIMEOUT_SECONDS = 30.0


def servers_quiet(b: Bench, window: float = 0.5) -> float:
    """Wait (at most QUIET_TIMEOUT_SECONDS) until the web server, the workers and the database have
    finished what the previous figure left them (the follow-up tasks of thousands of callbacks),
    so a figure measures only its own requests; the seconds waited."""
    started = time.monotonic()
    while time.monotonic() - started < QUIET_TIMEOUT_SECONDS:
        before = b.watch.cpu()
        time.sleep(window)
        used = sum(v for name, v in cpu_delta(before, b.watch.cpu()).items() if name != "bench")
        if used < QUIET_CPU_SHARE * window:
            break
    return round(time.monotonic() - started, 1)


def callback_one_client(b: Bench, world: CallbackWorld, warm_rate: float) -> None:
    """One client, one request at a time, judged as a ratio to the public relay's rate: measured
    in the same run, in paired rounds, when its directory is given (devtools.bench.public_relay);
    else the rate it recorded (PUBLIC_RELAY_CALLBACKS_PER_S), and the figure says which."""
    from .public_relay import relay_dir

    directory, why_not = relay_dir(getattr(b, "public_relay", "") or None)
    if directory is None:
        b.log(f"  public relay: {why_not}; judged against its recorded {PUBLIC_RELAY_CALLBACKS_PER_S:.0f}/s")
        _one_client_recorded(b, world, warm_rate, why_not)
    else:
        _one_client_beside(b, world, warm_rate, directory)


def _one_client_jobs(world: CallbackWorld, warm_rate: float, seconds: float) -> list[CallbackJob]:
    return world.jobs(int(max(warm_rate, 500) * seconds * 1.5 / 2) + 100)


def _one_client_run(b: Bench, jobs: list[CallbackJob], seconds: float, base_url: str | None = None) -> dict:
    """One client's run after the servers went quiet, with its rate and CPU per callback."""
    waited = servers_quiet(b)
    b.begin()
    before = b.watch.cpu()
    run = callback_run(b, jobs, seconds, 1, base_url=base_url)
    b.machine = b.watch.report()
    run["rate"] = run["accepted"] / run["elapsed"] if run["elapsed"] else 0.0
    run["cpu_ms"] = cpu_per(cpu_delta(before, b.watch.cpu()), run["accepted"])
    run["waited"] = waited
    return run


def _one_client_throughput(b: Bench, run: dict, **details) -> None:
    b.add(
        "callback_throughput_1",
        "callback throughput, one client",
        round(run["rate"], 1),
        "accepted/s",
        p50_ms=ms(median(run["latencies"])),
        p99_ms=ms(percentile(run["latencies"], 99)),
        errors=len(run["errors"]),
        token_limited=bool(run["exhausted"]),
        cpu_ms=run["cpu_ms"],
        waited_for_quiet_s=run["waited"],
        **details,
    )


def _one_client_recorded(b: Bench, world: CallbackWorld, warm_rate: float, why_not: str) -> None:
    seconds = b.profile.callback_seconds
    run = _one_client_run(b, _one_client_jobs(world, warm_rate, seconds), seconds)
    _one_client_throughput(b, run)
    target = public_relay_target()
    ratio = run["rate"] / PUBLIC_RELAY_CALLBACKS_PER_S
    b.add(
        "callback_vs_public_relay",
        "one client: callbacks/s ÷ the public relay's (recorded)",
        round(ratio, 2),
        "×",
        f"≥ {target}",
        ratio >= target and not run["errors"],
        public_relay_per_s=PUBLIC_RELAY_CALLBACKS_PER_S,
        public_relay_source=f"recorded, not measured in this run: {why_not}",
        errors=len(run["errors"]),
    )


ONE_CLIENT_ROUND_SECONDS = 5.0
"""Each paired round's length (quick and full profiles; the tiny one's is shorter)."""


def _one_client_beside(b: Bench, world: CallbackWorld, warm_rate: float, directory) -> None:
    """The public relay started beside us (same Redis server, its own database), then paired
    rounds, each side with fresh jobs from the same world (same repos, deliveries, bodies)."""
    from .paired import paired_rounds
    from .public_relay import PAIRS, PublicRelay

    seconds = min(b.profile.callback_seconds, ONE_CLIENT_ROUND_SECONDS)
    dispatches = [(guid, p.full_name) for guid in world.guids for p in world.projects]
    repos = [p.full_name for p in world.projects]
    relay = PublicRelay.start(directory, b.standin, repos, dispatches, b.services.log_dir)
    runs: list[dict] = []
    try:

        def measure(side: str) -> dict:
            base = None if side == "ours" else relay.base_url
            run = _one_client_run(b, _one_client_jobs(world, warm_rate, seconds), seconds, base)
            runs.append({**run, "side": side})
            b.log(f"    {side}: {run['rate']:.0f}/s, {len(run['errors'])} errors")
            return {"rate": run["rate"], "errors": len(run["errors"])}

        b.log(f"  public relay beside us ({directory}): {PAIRS} pairs of {seconds:.0f} s rounds, one client")
        result = paired_rounds(measure, ("ours", "theirs"), PAIRS)
    finally:
        relay.stop()
    _one_client_beside_figures(b, runs, result, directory)


def _one_client_beside_figures(b: Bench, runs: list[dict], result: dict, directory) -> None:
    ours = [r for r in runs if r["side"] == "ours"]
    middle = sorted(ours, key=lambda r: r["rate"])[len(ours) // 2]
    _one_client_throughput(b, middle, rounds_per_s=[round(r["rate"], 1) for r in ours])
    theirs_errors = [e for r in runs if r["side"] == "theirs" for e in r["errors"]][:3]
    target = public_relay_target()
    b.add(
        "callback_vs_public_relay",
        "one client: callbacks/s ÷ the public relay's (measured beside us)",
        result["ratio"],
        "×",
        f"≥ {target}",
        result["ratio"] is not None and result["ratio"] >= target and not result["errors"],
        public_relay_per_s=result["medians"]["theirs"],
        ours_per_s=result["medians"]["ours"],
        pair_ratios=result["ratios"],
        rounds=[{"side": r["side"], "per_s": round(r["rate"], 1), "errors": r["errors"]} for r in result["rounds"]],
        public_relay_source=f"measured in this run: {directory}, local_server under uvicorn (1 worker)",
        recorded_public_relay_per_s=PUBLIC_RELAY_CALLBACKS_PER_S,
        errors=result["errors"],
        public_relay_error_samples=theirs_errors,
    )


def _callback_figures(b: Bench, run: dict, jobs: list[CallbackJob], world: CallbackWorld) -> None:
    p = b.profile
    rate_target, p99_target = callback_targets()
    throughput = run["accepted"] / run["elapsed"]
    p99 = percentile(run["latencies"], 99)
    details = {
        "clients": p.callback_clients,
        "seconds": round(run["elapsed"], 2),
        "accepted": run["accepted"],
        "requests": len(run["records"]),
        "p50_ms": ms(median(run["latencies"])),
        "p90_ms": ms(percentile(run["latencies"], 90)),
        "max_ms": ms(max(run["latencies"], default=None)),
        "repos": world.REPOS,
        "level": "L2",
        "rate_limit_per_min": CALLBACK_RATE_LIMIT,
        "body_bytes": len(jobs[0].body("completed")) if jobs else 0,
        "token_limited": bool(run["exhausted"]),
        "errors_sample": [str(e[5])[:160] for e in run["errors"][:5]],
    }
    b.add(
        "callback_throughput",
        "callback throughput",
        round(throughput, 1),
        "accepted/s",
        f"≥ {rate_target:.0f}/s",
        throughput >= rate_target,
        **details,
    )
    b.add(
        "callback_p99",
        "callback latency p99",
        ms(p99),
        "ms",
        f"≤ {p99_target * 1000:.0f} ms",
        _le(p99, p99_target),
        p50_ms=details["p50_ms"],
    )
    b.add(
        "callback_errors",
        "callback errors",
        len(run["errors"]),
        "requests",
        "0",
        not run["errors"],
        statuses=sorted({e[2] for e in run["errors"]}),
    )


def _callback_cpu_figure(b: Bench, per: dict) -> None:
    cores = os.cpu_count() or 1
    all_parts = per.get("server", 0) + per.get("bench", 0)
    b.add(
        "callback_cpu",
        "CPU per accepted callback (web + db + worker)",
        per.get("server"),
        "ms",
        f"≤ {CALLBACK_CPU_TARGET_MS:.0f} ms",
        _le(per.get("server"), CALLBACK_CPU_TARGET_MS),
        **per,
        capacity_estimate_per_s=round(cores * 1000 / all_parts) if all_parts else None,
        note="capacity_estimate_per_s: this machine's cores divided by the CPU one callback costs (server + load generator)",
    )


def jobs_for(rate: float, seconds: float) -> int:
    """Jobs enough for 2.5 × `rate` callbacks a second (at least 500/s) for `seconds`: a run that
    used them all up is flagged (token_limited) and its throughput is only a lower bound."""
    return int(max(rate, 500) * seconds * 2.5 / 2) + 200


FLOOR_SIDES = ("callback", "floor")


def callback_floor(b: Bench, world: CallbackWorld, jobs: list[CallbackJob], rate: float) -> None:
    """The same requests (bodies, headers, clients) to an empty view behind the callbacks' own
    handler and gunicorn: what any machine endpoint costs here, and the callback's web CPU and
    rate over it (goal 2). The two take turns in short rounds (devtools/bench/paired.py, the
    profile's `floor_pairs` of `floor_round_seconds`), each callback round with jobs minted for it
    from the same world, and each ratio is the median of neighbouring rounds' ratios: taken from a
    10 s callback run and a 10 s floor run after it, the CPU ratio read 2.3–4.3× in one hour on one
    host (docs/performance.md, "sixth round")."""
    from .paired import paired_rounds

    p = b.profile
    runs: list[dict] = []

    def measure(side: str) -> dict:
        todo = _floor_round_jobs(b, world, rate, p.floor_round_seconds) if side == "callback" else jobs
        run = _floor_round(b, side, todo, p.floor_round_seconds)
        runs.append(run)
        return {"web_ms": run["cpu_ms"].get("web"), "rate": run["rate"], "errors": len(run["errors"])}

    b.begin()
    result = paired_rounds(measure, FLOOR_SIDES, p.floor_pairs, "web_ms")
    b.machine = b.watch.report()
    _callback_floor_figures(b, runs, result)


def _floor_round_jobs(b: Bench, world: CallbackWorld, rate: float, seconds: float) -> list[CallbackJob]:
    started = time.monotonic()
    jobs = world.jobs(jobs_for(rate, seconds))
    b.log(f"    minted {2 * len(jobs):,} OIDC tokens for a callback round in {time.monotonic() - started:.1f} s")
    return jobs


def _floor_round(b: Bench, side: str, jobs: list[CallbackJob], seconds: float) -> dict:
    """One round of `side` after the servers went quiet: its run, rate and CPU per answer."""
    from devtools.bench.urls import FLOOR_PATH

    waited = servers_quiet(b)
    before = b.watch.cpu()
    path = "/github/callback" if side == "callback" else f"/{FLOOR_PATH}"
    run = callback_run(b, jobs, seconds, b.profile.callback_clients, path=path)
    run["cpu_ms"] = cpu_per(cpu_delta(before, b.watch.cpu()), run["accepted"])
    run["rate"] = run["accepted"] / run["elapsed"] if run["elapsed"] else 0.0
    run.update(side=side, waited=waited)
    b.log(f"    {side}: {run['rate']:.0f}/s, web {run['cpu_ms'].get('web')} ms CPU each, waited {waited} s before")
    return run


def _callback_floor_figures(b: Bench, runs: list[dict], result: dict) -> None:
    from .paired import middle, pair_ratios

    floors = [r for r in runs if r["side"] == "floor"]
    run = sorted(floors, key=lambda r: r["cpu_ms"].get("web") or 0.0)[len(floors) // 2]  # by web CPU
    b.add(
        "floor_throughput",
        "empty view, same requests and middleware: answered",
        round(middle([r["rate"] for r in floors]), 1),
        "requests/s",
        requests=sum(len(r["records"]) for r in floors),
        errors=sum(len(r["errors"]) for r in floors),
        p50_ms=ms(median(run["latencies"])),
        p99_ms=ms(percentile(run["latencies"], 99)),
        rounds_per_s=[round(r["rate"], 1) for r in floors],
    )
    b.add("floor_cpu", "empty view: CPU per request (web)", run["cpu_ms"].get("web"), "ms", **run["cpu_ms"])
    b.add(
        "callback_floor_ratio",
        "callback web CPU / empty view web CPU",
        result["ratio"],
        "×",
        f"≤ {FLOOR_GOAL:g}",
        _le(result["ratio"], FLOOR_GOAL) and not result["errors"],
        callback_web_ms=result["medians"]["callback"],
        floor_web_ms=result["medians"]["floor"],
        pair_ratios=result["ratios"],
        rounds=[_floor_round_details(r) for r in runs],
        round_seconds=b.profile.floor_round_seconds,
        errors=result["errors"],
    )
    rate_ratios = pair_ratios(result["rounds"], FLOOR_SIDES, "rate")
    b.add(
        "callback_floor_rate_ratio",
        "callbacks/s ÷ empty view requests/s, same clients and server",
        middle([r for r in rate_ratios if r is not None]),
        "×",
        pair_ratios=rate_ratios,
    )


def _floor_round_details(run: dict) -> dict:
    return {
        "side": run["side"],
        "per_s": round(run["rate"], 1),
        "web_ms": run["cpu_ms"].get("web"),
        "errors": len(run["errors"]),
        "waited_s": run["waited"],
        "token_limited": bool(run["exhausted"]),
    }


def _callbacks_stored(world: CallbackWorld, jobs: list[CallbackJob], records: list) -> tuple[int, int, int]:
    """(accepted callbacks whose state is not in the database, rows with no accepted callback, checked)."""
    from relay.models import FailedTest, JobRun

    accepted: dict[int, set] = {}
    for index, status, _code, _secs, ok, _err in records:
        if ok:
            accepted.setdefault(index, set()).add(status)
    by_run = {job.run_id: job for job in jobs}
    rows = {
        run_id: (status, conclusion, pk)
        for run_id, status, conclusion, pk in JobRun.objects.filter(
            project__in=world.projects, run_id__gte="50000000"
        ).values_list("run_id", "status", "conclusion", "pk")
    }
    lost = checked = 0
    failed_expected = 0
    for job in jobs:
        done = accepted.get(job.index, set())
        row = rows.get(job.run_id)
        if not done:
            continue
        checked += len(done)
        if "completed" in done:
            ok = row is not None and row[0] == "completed" and row[1] == job.conclusion
            failed_expected += 3 if job.conclusion == "failure" else 0
            lost += 0 if ok else 1 + ("in_progress" in done)
        else:
            lost += 0 if row is not None and row[0] == "in_progress" else 1
    measured_runs = {job.run_id for job in jobs}
    extra = sum(1 for run_id in rows if run_id in measured_runs and not accepted.get(by_run[run_id].index))
    failed_stored = (
        FailedTest.objects.filter(
            job_run_id__in=[
                rows[j.run_id][2] for j in jobs if j.run_id in rows and "completed" in accepted.get(j.index, ())
            ]
        ).count()
        if failed_expected
        else 0
    )
    if failed_stored != failed_expected:
        lost += abs(failed_expected - failed_stored)
    return lost, extra, checked


# --- memory ----------------------------------------------------------------------------------------------


def memory(b: Bench, key_suffix: str = "", when: str = "after the callback run", web_only: bool = False) -> None:
    """VmHWM (peak resident set) of gunicorn's worker processes and the Celery worker."""
    b.machine = {}  # a reading, not a run: no load to report
    web = {pid: peak_rss_mb(pid) for pid in b.services.web_pids()}
    worker_pid = b.services.worker.pid if b.services.worker else None
    worker = peak_rss_mb(worker_pid) if worker_pid else None
    web_peak = max((v for v in web.values() if v is not None), default=None)
    target = "≤ 250 MB" if not key_suffix else ""
    ok = (lambda v: _le(v, 250)) if not key_suffix else (lambda v: None)
    b.add(
        f"web_peak_rss{key_suffix}",
        f"peak RSS, web worker ({when})",
        web_peak,
        "MB",
        target,
        ok(web_peak),
        per_worker={str(k): v for k, v in web.items()},
        rss_now={str(k): rss_mb(k) for k in web},
    )
    if not web_only:
        b.add(
            f"worker_peak_rss{key_suffix}",
            f"peak RSS, Celery worker ({when})",
            worker,
            "MB",
            target,
            ok(worker),
            rss_now=rss_mb(worker_pid) if worker_pid else None,
        )


# --- pages ----------------------------------------------------------------------------------------------


def _page_samples(b: Bench, path: str, warmup: int, samples: int, check) -> tuple[list[float], list[str]]:
    client = Client(b.base_url, timeout=120)
    times, problems = [], []
    try:
        for i in range(warmup + samples):
            reply = client.get(path)
            problem = check(reply)
            if problem:
                problems.append(problem)
            elif i >= warmup:
                times.append(reply.seconds)
    finally:
        client.close()
    return times, problems


def page_exists(b: Bench, path: str) -> bool:
    client = Client(b.base_url, timeout=120)
    try:
        return client.get(path).status != 404
    finally:
        client.close()


def grid(b: Bench, size: str) -> float | None:
    """`/` (the newest 50 trunk commits × the 40 backends) on the store as seeded."""
    from relay.models import UpstreamCommit

    p = b.profile
    jobs = b.store["jobs"]
    label = f"grid render `/`, store of {jobs:,} job rows"
    if not page_exists(b, "/"):
        b.unavailable(f"grid_render_{size}", label, "ms", "", "page not available")
        return None
    newest = (
        UpstreamCommit.objects.filter(is_trunk=True).order_by("-landed_at").values_list("sha", flat=True).first() or ""
    )

    def check(reply):
        if reply.status != 200:
            return f"status {reply.status}"
        if newest and newest[:7] not in reply.body.decode(errors="replace"):
            return "newest trunk commit not on the page"
        return None

    b.begin()
    before = b.watch.cpu()
    times, problems = _page_samples(b, "/", p.page_warmup, p.page_samples, check)
    per = cpu_per(cpu_delta(before, b.watch.cpu()), p.page_warmup + p.page_samples)
    value = ms(median(times))
    target = "≤ 200 ms" if size == "large" else ""
    b.add(
        f"grid_render_{size}",
        label,
        value,
        "ms",
        target,
        _le(value, 200) if size == "large" else None,
        store_jobs=jobs,
        p90_ms=ms(percentile(times, 90)),
        min_ms=ms(min(times, default=None)),
        samples=len(times),
        problems=problems[:5],
        cpu_ms_per_request=per,
    )
    return value


SUMMARY_WARM_MS = 150
SUMMARY_COLD_S = 2.0
"""Cold: from the first request on an empty cache to the complete page (rollups read, not computed)."""


def summary(b: Bench) -> None:
    """`/crcr?range=30d`. Cold (empty cache; the store's hourly rollups made by the seed, as beat
    keeps them in production): requests until the page stops answering with its loading state.
    Then spaced samples, the way a page refreshing itself sees it (the merged rollups cached, the
    current hour and the dispatch counts recomputed every minute)."""
    p = b.profile
    path = "/crcr?range=30d"
    label = f"summary render `/crcr` (30 days), store of {b.store['jobs']:,} job rows"
    if not page_exists(b, "/crcr"):
        b.unavailable("summary_render", label, "ms", f"≤ {SUMMARY_WARM_MS} ms", "page not available")
        return
    client = Client(b.base_url, timeout=120)
    b.begin()
    cold, started = [], time.monotonic()
    try:
        while True:
            reply = client.get(path)
            if reply.status != 200:
                raise RuntimeError(f"/crcr answered {reply.status}: {reply.body[:300]!r}")
            cold.append(reply.seconds)
            if b"time buckets ready" not in reply.body:
                break
            if time.monotonic() - started > p.summary_cold_timeout:
                b.unavailable(
                    "summary_render",
                    label,
                    "ms",
                    f"≤ {SUMMARY_WARM_MS} ms",
                    f"still loading after {p.summary_cold_timeout:.0f} s",
                )
                return
        cold_fill = time.monotonic() - started
        warm, pending = [], 0
        before = b.watch.cpu()
        for _ in range(p.summary_samples):
            time.sleep(p.summary_gap)
            reply = client.get(path)
            if reply.status != 200:
                raise RuntimeError(f"/crcr answered {reply.status}")
            if b"time buckets ready" in reply.body:
                pending += 1
            warm.append(reply.seconds)
        per = cpu_per(cpu_delta(before, b.watch.cpu()), len(warm))
    finally:
        client.close()
    value = ms(median(warm))
    b.add(
        "summary_render",
        label,
        value,
        "ms",
        f"≤ {SUMMARY_WARM_MS} ms",
        _le(value, SUMMARY_WARM_MS),
        p90_ms=ms(percentile(warm, 90)),
        max_ms=ms(max(warm)),
        samples=len(warm),
        spacing_s=p.summary_gap,
        loading_answers=pending,
        store_jobs=b.store["jobs"],
        cpu_ms_per_request=per,
    )
    b.add(
        "summary_cold_fill",
        "summary, cold cache: first request → complete page",
        round(cold_fill, 2),
        "s",
        f"≤ {SUMMARY_COLD_S:g} s",
        _le(cold_fill, SUMMARY_COLD_S),
        requests=len(cold),
        per_request_ms=[ms(t, 0) for t in cold],
    )


def _le(value, limit) -> bool | None:
    return None if value is None else value <= limit
