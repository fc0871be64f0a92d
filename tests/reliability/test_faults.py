"""Faults survived, with the app as real processes (gunicorn 2×8, a Celery worker with 8 threads, a
fast stand-in for beat) on a private PostgreSQL and Redis, under steady mixed traffic: push
webhooks for new upstream commits, and for two downstream repos of each an in_progress and a
completed callback.

* Redis stopped mid-load: webhooks still 202 (fan-out kick fails fast, rows durable), callbacks
  still 200 with `X-RateLimit-Degraded: true`; once Redis is back the sweeper sends everything,
  exactly once.
* PostgreSQL restarted mid-load: 503 with Retry-After while it is down, never a 500; nothing
  half-written; the same processes recover by themselves; retried requests complete the store.
* A Celery worker killed with SIGKILL mid-fan-out: a new worker and the sweeper send every row.
* The GitHub stand-in down for a while: dispatches and check-run writes retry with the stored,
  growing backoff (never sooner than it, nor than Retry-After) and are delivered when it is back.
"""

import itertools
import json
import threading
import time
from collections import Counter
from datetime import timedelta
from urllib.parse import urlsplit

import httpx
import pytest

from .conftest import (
    UPSTREAM,
    UPSTREAM_ID,
    Traffic,
    callback_body,
    downstream,
    percentile,
    pr_payload,
    push_payload,
    relay_env,
    report,
    seed,
    sha_for,
    standin_deliveries,
    wait_until,
)

# --- shared pieces ------------------------------------------------------------------------------------


class MixedLoad:
    """Threads that keep sending, until stopped, units of: a push webhook for a new upstream
    commit, then for two of the repos it is dispatched to an in_progress and a completed callback.
    Like the real clients, a job's completed is only sent once its in_progress was accepted."""

    def __init__(self, traffic: Traffic, issuers, repos: list[dict], prefix: str, threads: int = 3, pause: float = 0.1):
        self.traffic, self.issuers, self.repos, self.prefix = traffic, issuers, repos, prefix
        self.threads, self.pause = threads, pause
        self.units: list[dict] = []
        self._numbers = itertools.count()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> "MixedLoad":
        for n in range(self.threads):
            thread = threading.Thread(target=self._loop, name=f"load-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                k = next(self._numbers)
            unit = self.unit(k)
            unit["webhook"] = self.traffic.webhook("push", push_payload(unit["sha"]), unit["delivery"])
            for job in unit["jobs"]:
                job["answers"]["in_progress"] = self.send(unit, job, "in_progress")
                if job["answers"]["in_progress"].status == 200:
                    job["answers"]["completed"] = self.send(unit, job, "completed")
            with self._lock:
                self.units.append(unit)
            self._stop.wait(self.pause)

    def unit(self, k: int) -> dict:
        delivery = f"{self.prefix}-{k:05d}"
        repos = [self.repos[k % len(self.repos)], self.repos[(k + 1) % len(self.repos)]]
        jobs = []
        for repo in repos:
            tokens = {
                s: self.issuers.oidc.mint(
                    repository=repo["full_name"], repository_id=str(repo["github_repo_id"]), lifetime=1800
                )
                for s in ("in_progress", "completed")
            }
            jobs.append(
                {
                    "repo": repo["full_name"],
                    "run_id": str(1_000_000 + k),
                    "job": "test",
                    "tokens": tokens,
                    "answers": {},
                }
            )
        return {"k": k, "delivery": delivery, "sha": sha_for(delivery), "jobs": jobs}

    def send(self, unit: dict, job: dict, status: str):
        body = callback_body(
            unit["delivery"],
            status,
            run_id=job["run_id"],
            job=job["job"],
            conclusion="success",
            head_sha=unit["sha"],
            test_results={"passed": 10, "failed": 0},
        )
        return self.traffic.callback(f"{unit['delivery']}:{job['repo']}:{status}", body, job["tokens"][status])

    def retry_unanswered(self) -> Counter:
        """What GitHub (redelivery) and the callback client (retry on 503 / no answer) do afterwards."""
        retried = Counter()
        for unit in sorted(self.units, key=lambda u: u["k"]):
            if unit["webhook"].status not in (200, 202):
                unit["webhook"] = self.traffic.webhook("push", push_payload(unit["sha"]), unit["delivery"])
                retried["webhook"] += 1
            for job in unit["jobs"]:
                for status in ("in_progress", "completed"):
                    answer = job["answers"].get(status)
                    if answer is None or answer.status != 200:
                        job["answers"][status] = self.send(unit, job, status)
                        retried[f"callback {status}"] += answer is not None
        return retried


def store(pg_server, database: str) -> dict:
    q = lambda sql: pg_server.query(database, sql)  # noqa: E731
    return {
        "deliveries": {
            r["guid"]: r["n"]
            for r in q(
                "SELECT d.guid, count(x.id) AS n FROM relay_delivery d "
                "LEFT JOIN relay_dispatch x ON x.delivery_id = d.id GROUP BY d.guid"
            )
        },
        "dispatch_states": {
            r["state"]: r["n"] for r in q("SELECT state, count(*) AS n FROM relay_dispatch GROUP BY state")
        },
        "jobs": q(
            "SELECT j.delivery_key, p.full_name, j.status, j.conclusion, j.start_unknown, j.tests_passed FROM relay_jobrun j "
            "JOIN relay_project p ON p.id = j.project_id"
        ),
    }


def all_dispatches_sent(pg_server, database: str, expected: int) -> bool:
    states = store(pg_server, database)["dispatch_states"]
    return set(states) == {"sent"} and states["sent"] >= expected


def assert_store_complete(pg_server, database: str, load: MixedLoad, repos: list[dict]) -> dict:
    """Every unit's delivery with one dispatch per repo, and its two jobs completed, exactly."""
    now = store(pg_server, database)
    now["deliveries"] = {d: n for d, n in now["deliveries"].items() if d.startswith(load.prefix + "-")}
    now["jobs"] = [j for j in now["jobs"] if j["delivery_key"].startswith(load.prefix + "-")]
    want = {u["delivery"] for u in load.units}
    assert set(now["deliveries"]) == want, (
        f"missing {sorted(want - set(now['deliveries']))[:5]}, extra {sorted(set(now['deliveries']) - want)[:5]}"
    )
    assert set(now["deliveries"].values()) == {len(repos)}, "a delivery without all of its dispatch rows"
    jobs = {(j["delivery_key"], j["full_name"]): j for j in now["jobs"]}
    assert len(jobs) == len(now["jobs"]) == 2 * len(load.units)
    assert {(u["delivery"], job["repo"]) for u in load.units for job in u["jobs"]} == set(jobs)
    assert all(
        (j["status"], j["conclusion"], j["start_unknown"], j["tests_passed"]) == ("completed", "success", False, 10)
        for j in jobs.values()
    )
    return now


# --- Redis --------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_redis_stopped_mid_load(pg_server, pg_database, redis_server, github, stack_factory, tmp_path):
    repos = downstream(github, 5, "redis")
    env = relay_env(
        tmp_path,
        pg_server.url(pg_database),
        redis_server.url,
        github,
        CRCR_SWEEP_GRACE_SECONDS=2,
        CRCR_DISPATCH_LEASE_SECONDS=10,
        CRCR_UPSTREAM_WRITE_LEASE_SECONDS=10,
    )
    seed(env, {"projects": repos})
    stack = stack_factory(env)
    traffic = Traffic(stack.web())
    stack.worker()
    stack.supervise_workers()
    stack.beat(interval=2.0)
    load = MixedLoad(traffic, github, repos, "redis").start()

    time.sleep(3)
    stopping_at = time.time()  # answers finished before this saw a healthy Redis
    redis_server.stop()
    down_at = time.time()  # from here until `up_at` no Redis listens
    time.sleep(2)
    health = httpx.get(f"{stack.url}/healthz", timeout=15)
    # Events that touch the cache in other places than the rate limiter, answered during the outage.
    probes = redis_probes(traffic, github, repos)
    time.sleep(4)
    up_at = time.time()
    redis_server.start()
    time.sleep(4)
    load.stop()

    assert wait_until(lambda: all_dispatches_sent(pg_server, pg_database, len(load.units) * len(repos)), 120, 1), (
        f"{store(pg_server, pg_database)['dispatch_states']}\n{stack.logs()}"
    )
    webhooks, callbacks = traffic.of("webhook"), traffic.of("callback")
    during = lambda answers: [a for a in answers if down_at <= a.at and a.at + a.elapsed <= up_at]  # noqa: E731
    assert [a for a in webhooks if a.key.startswith("redis-") and a.status != 202] == []
    assert [a for a in callbacks if a.key.startswith("redis-") and a.status != 200] == []
    outage_hooks = [a for a in during(webhooks) if a.key.startswith("redis-")]
    outage_calls = [a for a in during(callbacks) if a.key.startswith("redis-")]
    assert len(outage_hooks) >= 5 and len(outage_calls) >= 10, "too little traffic during the outage to prove anything"
    assert max(a.elapsed for a in outage_hooks) < 5.0, "a webhook waited on the dead broker"
    silent = [a for a in outage_calls if a.headers.get("x-ratelimit-degraded") != "true"]
    assert not silent, f"callbacks answered during the outage without the degraded header: {silent[:3]}"
    assert not any(a.headers.get("x-ratelimit-degraded") for a in callbacks if a.at + a.elapsed < stopping_at)
    assert "rate limiter unavailable" in stack.log("web", 10**7)
    assert health.status_code == 200 and health.json()["status"] == "degraded" and health.elapsed.total_seconds() < 10
    assert all(status is not None and status < 500 for status in probes.values()), probes
    assert_store_complete(pg_server, pg_database, load, repos)
    sent = Counter({key: n for key, n in standin_deliveries(github).items() if key[0].startswith("redis-")})
    assert set(sent) == {(u["delivery"], r["full_name"].lower()) for u in load.units for r in repos}
    repeated = sum(n - 1 for n in sent.values())
    # Exactly once while the worker lives through the outage; a worker that died mid-send (see
    # `restarts`) may repeat only what it had in flight: at most its concurrency.
    assert repeated <= (8 * len(stack.restarts)), f"sent twice: {[k for k, v in sent.items() if v > 1][:5]}"
    report(
        "redis-stopped",
        units=len(load.units),
        webhooks=len(webhooks),
        callbacks=len(callbacks),
        outage_seconds=round(up_at - down_at, 1),
        webhooks_during_outage=len(outage_hooks),
        callbacks_during_outage=len(outage_calls),
        webhook_max_ms_during_outage=round(max(a.elapsed for a in outage_hooks) * 1000),
        webhook_p50_ms_during_outage=round(percentile([a.elapsed for a in outage_hooks], 0.5) * 1000),
        callback_max_ms_during_outage=round(max(a.elapsed for a in outage_calls) * 1000),
        degraded_header_on=f"{len(outage_calls)}/{len(outage_calls)}",
        dispatches_sent=sum(sent.values()),
        repeated=repeated,
        healthz_during_outage=health.json()["status"],
        probes=probes,
        worker_restarts=stack.restarts,
    )


def redis_probes(traffic: Traffic, github, repos) -> dict:
    """A PR webhook (check-run and gate receivers), an installation webhook (drops a cached
    token) and a nightly self-report (cached upstream-commit check), sent while Redis is down;
    the last two also have their own quick tests below."""
    pr = traffic.webhook("pull_request", pr_payload(900, sha_for("redis-pr-900")), "probe-pr-900")
    installation = traffic.webhook(
        "installation",
        {
            "action": "created",
            "installation": {"id": 99, "account": {"login": "probe"}},
            "repositories": [{"full_name": "probe/repo", "id": 1}],
        },
        "probe-installation",
    )
    token = github.oidc.mint(repository=repos[0]["full_name"], repository_id=str(repos[0]["github_repo_id"]))
    body = callback_body("f" * 40, "completed", run_id="77", job="nightly", conclusion="success", event_type="nightly")
    nightly = traffic.callback("probe-nightly", body, token)
    return {name: a.status for name, a in (("pull_request", pr), ("installation", installation), ("nightly", nightly))}


@pytest.fixture
def dead_redis_cache(settings, transactional_db):
    """The relay's cache pointed at a Redis port nobody listens on (what a stopped Redis looks like)."""
    from .conftest import free_port

    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",
            "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 1},
        }
    }
    return settings


@pytest.mark.timeout(60)
def test_an_installation_webhook_is_accepted_while_redis_is_down(dead_redis_cache, monkeypatch):
    from django.test import Client

    from relay.models import Delivery
    from tests.conftest import WEBHOOK_SECRET, webhook_headers

    dead_redis_cache.GITHUB_WEBHOOK_SECRET = WEBHOOK_SECRET
    body = json.dumps(
        {
            "action": "created",
            "installation": {"id": 99, "account": {"login": "probe"}},
            "repositories": [{"full_name": "probe/repo", "id": 1}],
        }
    ).encode()
    response = Client(raise_request_exception=False).post(
        "/github/webhook",
        data=body,
        content_type="application/json",
        **webhook_headers("installation", body, "inst-redis-down"),
    )
    assert Delivery.objects.filter(guid="inst-redis-down").exists()
    assert response.status_code in (200, 202), f"{response.status_code}: the stored delivery was answered as a failure"


@pytest.mark.timeout(60)
def test_a_nightly_self_report_is_answered_while_redis_is_down(standin, oidc, dead_redis_cache):
    """The upstream-commit check is cached; with the cache down it must still answer (by asking
    GitHub, or 503 with Retry-After), never 500."""
    from django.test import Client

    from tests.factories import ProjectFactory

    standin.add_installation(installation_id=1, account="pytorch")
    standin.add_repo(UPSTREAM, repo_id=UPSTREAM_ID, installation_id=1)
    sha = "e" * 40
    standin.add_commit(UPSTREAM, sha, message="nightly base")
    project = ProjectFactory(full_name="nightly/backend", github_repo_id=4242, level="L2")
    body = callback_body(sha, "completed", run_id="77", job="nightly", conclusion="success", event_type="nightly")
    token = oidc.mint(repository=project.full_name, repository_id="4242")
    response = Client(raise_request_exception=False).post(
        "/github/callback", data=json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert response.status_code in (200, 503), f"{response.status_code}: {response.content[:300]!r}"
    if response.status_code == 503:
        assert response.headers.get("Retry-After")


# --- PostgreSQL ----------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_postgresql_restarted_mid_load(pg_server, pg_database, redis_server, github, stack_factory, tmp_path):
    repos = downstream(github, 5, "pg")
    env = relay_env(
        tmp_path,
        pg_server.url(pg_database),
        redis_server.url,
        github,
        CRCR_SWEEP_GRACE_SECONDS=2,
        CRCR_DISPATCH_LEASE_SECONDS=10,
        CRCR_UPSTREAM_WRITE_LEASE_SECONDS=10,
    )
    seed(env, {"projects": repos})
    stack = stack_factory(env)
    traffic = Traffic(stack.web())
    stack.worker()
    stack.beat(interval=2.0)
    pids = {name: p.pid for name, p in stack.processes.items()}
    load = MixedLoad(traffic, github, repos, "pg").start()

    time.sleep(3)
    down_at = time.time()
    pg_server.stop("immediate")  # a crash: open transactions die mid-flight
    time.sleep(2)
    health = httpx.get(f"{stack.url}/healthz", timeout=15)
    time.sleep(3)
    pg_server.start()
    up_at = time.time()
    time.sleep(4)
    load.stop()

    answers = list(traffic.answers)  # a snapshot: the retries below append to traffic.answers
    outage = [a for a in answers if down_at <= a.at and a.at + a.elapsed <= up_at]
    assert [a for a in answers if a.status is None or a.status >= 500 and a.status != 503] == [], "a 500 or no answer"
    unavailable = [a for a in answers if a.status == 503]
    assert len([a for a in outage if a.status == 503]) >= 5, (
        f"expected 503s while PostgreSQL was down: {Counter(a.status for a in outage)}"
    )
    assert all(a.headers.get("retry-after") for a in unavailable), "a 503 without Retry-After"
    assert max(a.elapsed for a in outage) < 10, "a request hung on the dead database"
    assert health.status_code == 503 and health.json()["status"] == "down"

    # Nothing half-written: every delivery that exists has all of its dispatch rows, and every
    # webhook answered 202 was stored (checked before anyone retries anything).
    before_retry = store(pg_server, pg_database)
    assert set(before_retry["deliveries"].values()) <= {len(repos)}, "a delivery stored without all of its dispatches"
    accepted = {u["delivery"] for u in load.units if u["webhook"].status == 202}
    assert accepted <= set(before_retry["deliveries"]), "a webhook answered 202 was lost"

    retried = load.retry_unanswered()
    retries = traffic.answers[len(answers) :]
    assert retries and [a for a in retries if a.status not in (200, 202)] == [], Counter(
        (a.status, a.body.get("detail", "")[:80]) for a in retries
    )
    assert_store_complete(pg_server, pg_database, load, repos)
    assert wait_until(lambda: all_dispatches_sent(pg_server, pg_database, len(load.units) * len(repos)), 120, 1), (
        f"{store(pg_server, pg_database)['dispatch_states']}\n{stack.logs()}"
    )
    sent = standin_deliveries(github)
    assert set(sent) == {(u["delivery"], r["full_name"].lower()) for u in load.units for r in repos}
    # At least once: a send whose POST reached GitHub while the database was gone could not be
    # recorded, and is sent again after its lease; at most the worker's concurrency of them.
    assert sum(n - 1 for n in sent.values()) <= 8, f"{sum(n - 1 for n in sent.values())} dispatches repeated"
    # Recovery without help: the very same processes, and healthy again.
    assert {name: p.pid for name, p in stack.processes.items()} == pids and all(stack.alive(n) for n in pids)
    assert wait_until(lambda: httpx.get(f"{stack.url}/healthz", timeout=10).json()["checks"]["database"]["ok"], 30, 1)
    report(
        "postgresql-restarted",
        units=len(load.units),
        requests=len(answers),
        outage_seconds=round(up_at - down_at, 1),
        answered_503=len(unavailable),
        answered_500=0,
        outage_max_ms=round(max(a.elapsed for a in outage) * 1000),
        retried=dict(retried),
        dispatches_sent=sum(sent.values()),
        resent_twice=sum(1 for v in sent.values() if v > 1),
        healthz_during_outage=health.status_code,
    )


# --- a worker killed mid-fan-out -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_worker_killed_with_sigkill_mid_fan_out(
    pg_server, pg_database, redis_server, github, stack_factory, tmp_path
):
    repos = downstream(github, 10, "kill")
    env = relay_env(
        tmp_path,
        pg_server.url(pg_database),
        redis_server.url,
        github,
        CRCR_SWEEP_GRACE_SECONDS=2,
        CRCR_DISPATCH_LEASE_SECONDS=5,
        CRCR_UPSTREAM_WRITE_LEASE_SECONDS=5,
    )
    seed(env, {"projects": repos})
    stack = stack_factory(env)
    traffic = Traffic(stack.web())
    github.set_latency(0.4)  # GitHub is slow today: many sends are in flight at any moment
    stack.worker()
    stack.beat(interval=2.0)
    deliveries = [f"kill-{k:03d}" for k in range(20)]
    for delivery in deliveries:
        assert traffic.webhook("push", push_payload(sha_for(delivery)), delivery).status == 202
    expected = len(deliveries) * len(repos)

    sent_count = lambda: store(pg_server, pg_database)["dispatch_states"].get("sent", 0)  # noqa: E731
    assert wait_until(lambda: sent_count() >= 30, 60, 0.2), stack.logs()
    stack.kill("worker1")
    states_at_kill = store(pg_server, pg_database)["dispatch_states"]
    received_at_kill = len(github.dispatches)
    assert states_at_kill.get("sent", 0) < expected, "the fan-out finished before the kill; nothing proved"
    time.sleep(1)
    stack.worker()

    assert wait_until(lambda: all_dispatches_sent(pg_server, pg_database, expected), 150, 1), (
        f"{store(pg_server, pg_database)['dispatch_states']}\n{stack.logs()}"
    )
    sent = standin_deliveries(github)
    assert set(sent) == {(d, r["full_name"].lower()) for d in deliveries for r in repos}, (
        "a dispatch never reached GitHub"
    )
    twice = sum(v - 1 for v in sent.values())
    # At-least-once: only a send that was in flight (its POST already at GitHub) when the worker
    # died can be repeated, so repeats are bounded by the worker's concurrency.
    assert twice <= states_at_kill.get("sending", 0), f"{twice} repeated dispatches, {states_at_kill} at the kill"
    report(
        "worker-sigkill",
        dispatches=expected,
        states_at_kill=states_at_kill,
        received_by_github_at_kill=received_at_kill,
        delivered=len(sent),
        repeated=twice,
        worker1_exit=stack.processes["worker1"].returncode,
    )


# --- GitHub down -------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_github_down_for_a_while(pg_server, pg_database, redis_server, github, issuers, stack_factory, tmp_path):
    github.add_installation(installation_id=1, account="pytorch")
    github.add_repo(UPSTREAM, repo_id=UPSTREAM_ID, installation_id=1)
    repos = downstream(github, 2, "ghl2") + downstream(github, 2, "ghl4", level="L4", first_id=721_000)
    base, cap = 1.0, 4.0
    env = relay_env(
        tmp_path,
        pg_server.url(pg_database),
        redis_server.url,
        github,
        issuers,
        CRCR_SWEEP_GRACE_SECONDS=1,
        CRCR_DISPATCH_LEASE_SECONDS=15,
        CRCR_DISPATCH_BACKOFF_BASE_SECONDS=base,
        CRCR_DISPATCH_BACKOFF_MAX_SECONDS=cap,
        CRCR_UPSTREAM_WRITE_LEASE_SECONDS=15,
        CRCR_UPSTREAM_WRITE_BACKOFF_BASE_SECONDS=base,
        CRCR_UPSTREAM_WRITE_BACKOFF_MAX_SECONDS=cap,
    )
    seed(env, {"projects": repos})
    stack = stack_factory(env)
    traffic = Traffic(stack.web())
    stack.worker()
    stack.beat(interval=1.0, tasks=("relay.dispatch_sweep", "relay.upstream_write_sweep"))
    q = lambda sql: pg_server.query(pg_database, sql)  # noqa: E731

    def unsent_writes():
        return q("SELECT count(*) AS n FROM relay_upstreamwrite WHERE state IN ('pending', 'retrying', 'sending')")[0][
            "n"
        ]

    head_a = sha_for("gh-head-a")
    assert traffic.webhook("pull_request", pr_payload(11, head_a), "gh-pr-11").status == 202
    assert wait_until(lambda: all_dispatches_sent(pg_server, pg_database, 4) and unsent_writes() == 0, 60, 0.5), (
        stack.logs()
    )
    tokens = {d["repo"].lower(): d["client_payload"]["callback_token"] for d in github.dispatches}

    port = urlsplit(github.url).port
    github.stop()
    down_at = time.time()
    head_b = sha_for("gh-head-b")
    assert traffic.webhook("pull_request", pr_payload(12, head_b), "gh-pr-12").status == 202
    assert traffic.webhook("push", push_payload(sha_for("gh-push")), "gh-push").status == 202
    l4 = [r for r in repos if r["level"] == "L4"]
    for n, repo in enumerate(l4):
        conclusion = "failure" if n == 0 else "success"
        for status in ("in_progress", "completed"):
            body = callback_body(
                "gh-pr-11",
                status,
                run_id=f"55{n}",
                job="build",
                conclusion=conclusion,
                event_type="pull_request",
                head_sha=head_a,
                pr_number=11,
                callback_token=tokens[repo["full_name"].lower()],
            )
            token = issuers.oidc.mint(repository=repo["full_name"], repository_id=str(repo["github_repo_id"]))
            answer = traffic.callback(f"gh-{repo['full_name']}-{status}", body, token)
            assert answer.status == 200, answer
    time.sleep(9)
    during = {r["state"]: r["n"] for r in q("SELECT state, count(*) AS n FROM relay_dispatch GROUP BY state")}
    writes_during = {
        r["state"]: r["n"] for r in q("SELECT state, count(*) AS n FROM relay_upstreamwrite GROUP BY state")
    }
    assert during.get("retrying", 0) + during.get("sending", 0) + during.get("pending", 0) == 8, during
    assert sum(writes_during.get(s, 0) for s in ("pending", "retrying", "sending")) >= 1, (
        f"no check-run write waiting on GitHub: {writes_during}"
    )
    # When it comes back, the first two dispatch POSTs meet a secondary rate limit with Retry-After.
    github.fail("POST", r"/repos/[^/]+/[^/]+/dispatches", status=403, retry_after=3, times=2)
    github.start(port=port)
    up_at = time.time()

    def every_run_written() -> bool:
        # No write unsent can also mean one not made yet: a callback's check run is queued by its
        # follow-up task, which a slow host may run after the other writes are sent.
        names = {(r["name"], r["head_sha"]) for r in github.check_runs}
        builds = {(f"crcr/{repo['full_name']}/reliability-ci/build", head_a) for repo in l4}
        return builds | {("crcr/gate", head_a), ("crcr/gate", head_b)} <= names

    assert wait_until(
        lambda: all_dispatches_sent(pg_server, pg_database, 12) and unsent_writes() == 0 and every_run_written(),
        90,
        0.5,
    ), f"{store(pg_server, pg_database)['dispatch_states']} writes={unsent_writes()}\n{stack.logs()}"
    sent = standin_deliveries(github)
    assert set(sent) == {(d, r["full_name"].lower()) for d in ("gh-pr-11", "gh-pr-12", "gh-push") for r in repos}
    assert max(sent.values()) == 1
    runs = {(r["name"], r["head_sha"]): r for r in github.check_runs}
    for n, repo in enumerate(l4):
        run = runs.get((f"crcr/{repo['full_name']}/reliability-ci/build", head_a))
        assert run is not None, f"no check run for {repo['full_name']}: {sorted(runs)}"
        assert (run["status"], run["conclusion"]) == ("completed", "failure" if n == 0 else "success")
    assert ("crcr/gate", head_b) in runs and ("crcr/gate", head_a) in runs

    dispatch_attempts = q(
        "SELECT dispatch_id AS row, number, started_at, duration_ms, status_code, outcome, retry_at FROM relay_dispatchattempt"
    )
    write_attempts = q(
        "SELECT write_id AS row, number, started_at, duration_ms, status_code, outcome, retry_at FROM relay_upstreamwriteattempt"
    )
    checked_dispatch = backoff_respected(dispatch_attempts, base, cap)
    checked_writes = backoff_respected(write_attempts, base, cap)
    assert checked_dispatch["retries"] >= 8 and checked_writes["retries"] >= 1
    assert checked_dispatch["retry_after_honoured"] >= 1, "no attempt met the Retry-After fault"
    report(
        "github-down",
        outage_seconds=round(up_at - down_at, 1),
        dispatches_delivered=len(sent),
        check_runs=len(runs),
        dispatch_attempts=len(dispatch_attempts),
        write_attempts=len(write_attempts),
        dispatch_backoff=checked_dispatch,
        write_backoff=checked_writes,
    )


def backoff_respected(attempts: list[dict], base: float, cap: float) -> dict:
    """For every retried row: the next attempt started no sooner than the stored retry time; that
    time was at least half the capped exponential step after the failed attempt ended (equal
    jitter) and no later than the full step — or, with Retry-After, no sooner than it."""
    by_row: dict[int, list[dict]] = {}
    for attempt in attempts:
        by_row.setdefault(attempt["row"], []).append(attempt)
    retries = honoured = 0
    waits = []
    slack = timedelta(milliseconds=50)
    for rows in by_row.values():
        rows.sort(key=lambda a: a["number"])
        for earlier, later in zip(rows, rows[1:]):
            if earlier["outcome"] != "transient":
                continue
            retries += 1
            ended = earlier["started_at"] + timedelta(milliseconds=earlier["duration_ms"])
            wait = (earlier["retry_at"] - ended).total_seconds()
            step = min(cap, base * 2 ** (earlier["number"] - 1))
            assert later["started_at"] + slack >= earlier["retry_at"], (
                f"attempt {later['number']} started before its backoff ran out"
            )
            if earlier["status_code"] in (403, 429):
                assert wait >= 3 - 0.1, f"Retry-After 3 s not honoured: waited {wait:.2f} s"
                honoured += 1
            else:
                assert step / 2 - 0.1 <= wait <= step + 0.5, (
                    f"attempt {earlier['number']}: backoff {wait:.2f} s outside [{step / 2}, {step}]"
                )
            waits.append(round(wait, 2))
    return {
        "rows": len(by_row),
        "retries": retries,
        "retry_after_honoured": honoured,
        "max_wait_s": max(waits, default=0),
    }
