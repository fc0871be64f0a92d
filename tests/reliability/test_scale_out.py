"""Scale-out on the existing engines: two web hosts (two gunicorn masters, one worker process each)
and two Celery workers (separate processes) on one PostgreSQL and one Redis, with the sweeper
racing the on-commit kicks from both workers.

* A burst of push webhooks, each delivered to both web processes at the same moment (GitHub's
  redelivery racing the original): every delivery stored once, every dispatch reaches GitHub
  exactly once with one successful attempt.
* A burst of callbacks, each sent to both web processes at the same moment (a client retry landing
  on the other host): every job stored once and completed, one used-token row per token.
* Two Celery beats (one started by mistake) with both workers: each beat entry is published, and
  run, once per period (crcr/beat.py claims the period)."""

import re
import time
from collections import Counter

import pytest

from .conftest import (
    Traffic,
    callback_body,
    downstream,
    push_payload,
    relay_env,
    report,
    seed,
    sha_for,
    standin_deliveries,
    wait_until,
)

pytestmark = pytest.mark.slow

REPOS = 6
DELIVERIES = 40
JOBS_PER_DELIVERY = 2
CLIENTS = 16


def two_web_two_workers(stack) -> tuple[Traffic, Traffic]:
    webs = [Traffic(stack.web(workers=1, threads=8, name=f"web{n}")) for n in (1, 2)]
    stack.worker(concurrency=4)
    stack.worker(concurrency=4)
    return webs[0], webs[1]


def both_at_once(webs: tuple[Traffic, Traffic], send) -> list[tuple]:
    """Each item sent to both web processes; the two copies sit next to each other in the queue,
    so two client threads send them at the same moment."""
    return [(web, item) for item in send for web in webs]


def sent_rows(pg_server, database: str) -> list[dict]:
    return pg_server.query(
        database,
        "SELECT d.id, d.state, d.attempts, "
        "(SELECT count(*) FROM relay_dispatchattempt a WHERE a.dispatch_id = d.id) AS attempt_rows, "
        "(SELECT count(*) FROM relay_dispatchattempt a WHERE a.dispatch_id = d.id AND a.outcome = 'sent') AS sent_rows "
        "FROM relay_dispatch d",
    )


@pytest.mark.timeout(180)
def test_two_web_processes_and_two_workers_send_each_dispatch_once_and_store_each_callback_once(
    pg_server, pg_database, redis_server, github, stack_factory, tmp_path
):
    repos = downstream(github, REPOS, "scale")
    env = relay_env(
        tmp_path,
        pg_server.url(pg_database),
        redis_server.url,
        github,
        CRCR_SWEEP_GRACE_SECONDS=1,
        CRCR_DISPATCH_LEASE_SECONDS=30,
    )
    seed(env, {"projects": repos})
    stack = stack_factory(env)
    webs = two_web_two_workers(stack)
    stack.beat(interval=1.0)  # the sweeper every second, on whichever worker takes it, racing the kicks
    deliveries = [f"scale-{k:03d}" for k in range(DELIVERIES)]

    began = time.monotonic()
    hooks = webs[0].run(
        lambda pair: pair[0].webhook("push", push_payload(sha_for(pair[1])), pair[1]),
        both_at_once(webs, deliveries),
        CLIENTS,
    )
    webhook_seconds = time.monotonic() - began
    expected = len(deliveries) * len(repos)
    assert wait_until(lambda: len(github.dispatches) >= expected, 90, 0.2), (
        f"{len(github.dispatches)}/{expected} dispatches reached GitHub\n{stack.logs()}"
    )
    fan_out_seconds = time.monotonic() - began

    jobs = [
        {"delivery": d, "repo": repos[(k + n) % len(repos)], "run_id": str(3_000_000 + k * 10 + n)}
        for k, d in enumerate(deliveries)
        for n in range(JOBS_PER_DELIVERY)
    ]
    requests = {status: callback_requests(github, jobs, status) for status in ("in_progress", "completed")}
    callbacks_began = time.monotonic()
    callbacks = {
        status: webs[0].run(lambda pair: pair[0].callback(*pair[1]), both_at_once(webs, items), CLIENTS)
        for status, items in requests.items()
    }
    callback_seconds = time.monotonic() - callbacks_began
    time.sleep(3)  # three more sweeps over a finished store: nothing may go out again

    # Webhooks: each delivery accepted once (202), its racing copy answered as a duplicate.
    per_delivery = {d: Counter() for d in deliveries}
    for answer in hooks:
        per_delivery[answer.key][(answer.status, answer.body.get("status"))] += 1
    assert all(n == {(202, "accepted"): 1, (200, "duplicate"): 1} for n in per_delivery.values()), per_delivery

    # Dispatches: exactly once at GitHub per (delivery, repo), one successful attempt per row.
    received = standin_deliveries(github)
    assert set(received) == {(d, r["full_name"].lower()) for d in deliveries for r in repos}
    assert max(received.values()) == 1, f"sent twice: {[k for k, n in received.items() if n > 1][:5]}"
    rows = sent_rows(pg_server, pg_database)
    assert len(rows) == expected
    assert {(r["state"], r["attempts"], r["attempt_rows"], r["sent_rows"]) for r in rows} == {("sent", 1, 1, 1)}

    # Callbacks: every job once, completed; the racing copy of each callback is a duplicate.
    for status, answers in callbacks.items():
        assert Counter((a.status, a.body.get("status")) for a in answers) == {
            (200, status): len(jobs),
            (200, "duplicate"): len(jobs),
        }
    stored = pg_server.query(
        pg_database,
        "SELECT j.delivery_key, p.full_name, j.run_id, j.status, j.conclusion, j.start_unknown, j.dispatch_id "
        "FROM relay_jobrun j JOIN relay_project p ON p.id = j.project_id",
    )
    assert len(stored) == len(jobs)
    assert {(j["delivery_key"], j["full_name"], j["run_id"]) for j in stored} == {
        (j["delivery"], j["repo"]["full_name"], j["run_id"]) for j in jobs
    }
    assert {(j["status"], j["conclusion"], j["start_unknown"], j["dispatch_id"] is not None) for j in stored} == {
        ("completed", "success", False, True)
    }
    [tokens] = pg_server.query(pg_database, "SELECT count(*) AS n, count(DISTINCT jti) AS d FROM relay_usedtoken")
    accepted = sum(1 for answers in callbacks.values() for a in answers if a.body.get("status") != "duplicate")
    assert tokens == {"n": accepted, "d": accepted}

    workers_sent = {name: sends_logged(stack.log(name, 10**7)) for name in ("worker1", "worker2")}
    report(
        "scale-out",
        web_processes=2,
        workers=2,
        webhooks=len(hooks),
        deliveries=len(deliveries),
        dispatches=expected,
        webhook_seconds=round(webhook_seconds, 2),
        fan_out_complete_seconds=round(fan_out_seconds, 2),
        callbacks=sum(len(a) for a in callbacks.values()),
        jobs=len(jobs),
        callback_seconds=round(callback_seconds, 2),
        callbacks_per_s=round(sum(len(a) for a in callbacks.values()) / callback_seconds, 1),
        sends_per_worker=workers_sent,
    )


def callback_requests(github, jobs: list[dict], status: str) -> list[tuple]:
    """One callback per job, each with a fresh token: (key, body, token)."""
    items = []
    for job in jobs:
        repo = job["repo"]
        token = github.oidc.mint(repository=repo["full_name"], repository_id=str(repo["github_repo_id"]), lifetime=900)
        body = callback_body(
            job["delivery"],
            status,
            run_id=job["run_id"],
            job="test",
            conclusion="success",
            head_sha=sha_for(job["delivery"]),
            test_results={"passed": 10, "failed": 0},
        )
        items.append((f"{job['delivery']}:{repo['full_name']}:{status}", body, token))
    return items


def sends_logged(log: str) -> int:
    return len(re.findall(r"Task relay\.dispatch_send\[[^\]]+\] succeeded in [0-9.e-]+s: 'sent'", log))


# --- beat ----------------------------------------------------------------------------------------------

PERIODS = {"relay.results_sweep": 2, "relay.heartbeat": 3}


@pytest.mark.timeout(150)
def test_two_beats_and_two_workers_run_each_periodic_task_once_per_period(
    pg_server, pg_database, redis_server, github, stack_factory, tmp_path
):
    env = relay_env(tmp_path, pg_server.url(pg_database), redis_server.url, github)
    entries = [{"name": f"scale-out-every-{s}s-{task}", "task": task, "every": s} for task, s in PERIODS.items()]
    seed(env, {"periodic": entries})
    stack = stack_factory(env)
    stack.worker(concurrency=4)
    stack.worker(concurrency=4)
    began = time.monotonic()
    stack.celery_beat("beat1")
    stack.celery_beat("beat2")  # the one started by mistake
    both = time.monotonic()
    time.sleep(16)
    together = time.monotonic() - both  # both beats up: the entries must have run every period
    for name in ("beat1", "beat2"):
        stack.stop_process(name)
    window = time.monotonic() - began  # any beat up: they may have run at most once per period
    time.sleep(2)  # the last published tasks finish

    beats = stack.log("beat1", 10**7) + stack.log("beat2", 10**7)
    workers = stack.log("worker1", 10**7) + stack.log("worker2", 10**7)
    published, skipped, ran, sent = {}, {}, {}, {}
    for entry in entries:
        published[entry["task"]] = beats.count(f"Sending due task {entry['name']} ")
        skipped[entry["task"]] = beats.count(f"beat: {entry['name']} was published by another beat")
        ran[entry["task"]] = len(re.findall(rf"Task {re.escape(entry['task'])}\[[^\]]+\] succeeded", workers))
        # Every send of the task, whichever entry sent it: the app's own schedule sends one of these
        # tasks too (every-30s-worker-heartbeat), and a run of that send is a run as well.
        sent[entry["task"]] = len(re.findall(rf"Sending due task \S+ \({re.escape(entry['task'])}\)", beats))
    for task, period in PERIODS.items():
        # One claim per period, give or take the period in which the other beat takes over; and a
        # beat woken late on a busy machine may stretch a period by a fraction.
        most, least = window / period + 2, together / (period * 1.5) - 1
        assert published[task] <= most, f"{task} published {published[task]} times in {window:.1f} s"
        assert published[task] >= least, f"{task} published only {published[task]} times in {together:.1f} s"
        assert skipped[task] >= 1, f"the second beat never tried {task}: nothing proved\n{beats[-3000:]}"
        assert ran[task] == sent[task], f"{task}: published {sent[task]} (by any entry), run {ran[task]}"
    assert all(re.search(r"Task relay\.\w+\[[^\]]+\] succeeded", stack.log(w, 10**7)) for w in ("worker1", "worker2"))
    report(
        "two-beats",
        window_seconds=round(window, 1),
        both_beats_seconds=round(together, 1),
        periods=PERIODS,
        published=published,
        skipped_by_claim=skipped,
        ran=ran,
    )
