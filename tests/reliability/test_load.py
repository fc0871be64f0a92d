"""Load without loss: 10,000 callbacks (5,000 jobs × in_progress + completed) for 500 upstream
commits across 40 downstream repos, from 16 concurrent clients, against gunicorn (2 workers × 8
threads) on PostgreSQL and Redis. 5% of the callbacks are also re-sent at the same moment, with the
same token (a client retrying): the store must hold exactly the expected jobs, no duplicates, no
gaps, every result as sent. A smaller run does the same on the embedded defaults (SQLite, local
cache, one gunicorn process)."""

import random
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest

from .conftest import ROOT, Traffic, callback_body, percentile, relay_env, report, seed, sha_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(480)]

REPOS = 40
COMMITS = 500
CLIENTS = 16
DUPLICATE_EVERY = 20  # one job in 20 has each of its callbacks sent twice, concurrently


def repo_name(j: int) -> str:
    return f"load-org-{j:02d}/torch-backend"


def jobs(commits: int = COMMITS, repos: int = REPOS) -> list[dict]:
    """Every (commit, repo) pair with (n + j) % 4 == 0: a quarter of the repos per commit (5,000 jobs)."""
    out = []
    for n in range(commits):
        for j in range(repos):
            if (n + j) % 4:
                continue
            failed = (n * 7 + j) % 11 == 0
            out.append(
                {
                    "index": len(out),
                    "delivery": f"load-{n:04d}",
                    "sha": sha_for(f"load-commit-{n}"),
                    "repo": repo_name(j),
                    "repo_id": 710_000 + j,
                    "run_id": str(n * 100 + j + 1),
                    "job": f"test (default, {j % 3 + 1}, 3)",
                    "conclusion": "failure" if failed else "success",
                    "failed_tests": [f"test_ops.py::TestCommon::test_{n}_{j}_{k}" for k in range(2)] if failed else [],
                }
            )
    return out


def completed_extra(job: dict) -> dict:
    failed = len(job["failed_tests"])
    return {
        "test_results": {"passed": 100, "failed": failed, "skipped": 3},
        "failed_tests": [
            {"name": name, "classname": "TestCommon", "message": "AssertionError"} for name in job["failed_tests"]
        ],
        "environment": {"device": "xpu", "driver": f"d{job['index'] % 5}"},
    }


def test_ten_thousand_callbacks_from_concurrent_clients_store_exactly_the_expected_jobs(
    pg_server, pg_database, redis_server, github, stack_factory, tmp_path
):
    env = relay_env(tmp_path, pg_server.url(pg_database), redis_server.url, github)
    seeded = seed(
        env,
        {
            "projects": [
                {
                    "full_name": repo_name(j),
                    "github_repo_id": 710_000 + j,
                    "level": "L2",
                    "hardware_kind": "gpu",
                    "rate_limit_per_min": 1_000_000,
                    "display_name": f"Load {j}",
                }
                for j in range(REPOS)
            ],
            "deliveries": [
                {"delivery_id": f"load-{n:04d}", "event": "push", "head_sha": sha_for(f"load-commit-{n}")}
                for n in range(COMMITS)
            ],
        },
    )
    assert seeded["dispatches"] == REPOS * COMMITS
    stack = stack_factory(env)
    traffic = Traffic(stack.web(workers=2, threads=8))

    expected = jobs()
    assert len(expected) == 5000
    rng = random.Random(20261202)
    started_mint = time.monotonic()
    tokens = {
        (job["index"], status): github.oidc.mint(
            repository=job["repo"], repository_id=str(job["repo_id"]), lifetime=1800
        )
        for job in expected
        for status in ("in_progress", "completed")
    }
    mint_seconds = time.monotonic() - started_mint

    def phase(status: str) -> tuple[list, float]:
        sends = [(job, status) for job in expected] + [
            (job, status) for job in expected if job["index"] % DUPLICATE_EVERY == 0
        ]
        rng.shuffle(sends)

        def send(item):
            job, st = item
            extra = completed_extra(job) if st == "completed" else {}
            body = callback_body(
                job["delivery"],
                st,
                run_id=job["run_id"],
                job=job["job"],
                conclusion=job["conclusion"],
                head_sha=job["sha"],
                **extra,
            )
            return traffic.callback(f"{job['index']}:{st}", body, tokens[(job["index"], st)])

        began = time.monotonic()
        answers = traffic.run(send, sends, CLIENTS)
        return answers, time.monotonic() - began

    in_progress, seconds_a = phase("in_progress")
    completed, seconds_b = phase("completed")
    answers = in_progress + completed

    # Every request answered 200, each job once as in_progress/completed, its copy as duplicate.
    problems = [a for a in answers if a.status != 200]
    assert not problems, f"{len(problems)} non-200 answers, e.g. {problems[:3]}\n{stack.log('web')}"
    by_status = Counter(a.body.get("status") for a in answers)
    duplicates_sent = 2 * len([j for j in expected if j["index"] % DUPLICATE_EVERY == 0])
    assert by_status == {"in_progress": 5000, "completed": 5000, "duplicate": duplicates_sent}, by_status
    per_key = Counter((a.key, a.body["status"] == "duplicate") for a in answers)
    assert all(per_key[(f"{j['index']}:{st}", False)] == 1 for j in expected for st in ("in_progress", "completed"))

    # The store: exactly the expected jobs, each completed with what was sent; no duplicates, no gaps.
    rows = pg_server.query(
        pg_database,
        """
        SELECT j.delivery_key, p.full_name, j.run_id, j.run_attempt, j.job_name, j.status, j.conclusion, j.start_unknown,
               j.in_progress_at IS NOT NULL AS started, j.tests_passed, j.tests_failed, j.tests_total, j.environment, j.dispatch_id,
               (SELECT count(*) FROM relay_failedtest f WHERE f.job_run_id = j.id) AS failed_rows
        FROM relay_jobrun j JOIN relay_project p ON p.id = j.project_id""",
    )
    stored = {(r["delivery_key"], r["full_name"], r["run_id"], r["run_attempt"], r["job_name"]): r for r in rows}
    want = {(j["delivery"], j["repo"], j["run_id"], 1, j["job"]): j for j in expected}
    assert len(rows) == len(stored) == 5000, f"{len(rows)} rows, {len(stored)} distinct keys"
    assert set(stored) == set(want), (
        f"missing {len(set(want) - set(stored))}, unexpected {len(set(stored) - set(want))}"
    )
    wrong = [
        key
        for key, row in stored.items()
        if (row["status"], row["conclusion"], row["start_unknown"], row["started"])
        != ("completed", want[key]["conclusion"], False, True)
        or (row["tests_failed"], row["failed_rows"]) != (len(want[key]["failed_tests"]),) * 2
        or row["tests_total"] != 103 + len(want[key]["failed_tests"])
        or row["dispatch_id"] is None
        or row["environment"].get("device") != "xpu"
    ]
    assert not wrong, f"{len(wrong)} jobs stored differently from what was sent, e.g. {[stored[k] for k in wrong[:2]]}"
    [tokens_used] = pg_server.query(pg_database, "SELECT count(*) AS n, count(DISTINCT jti) AS d FROM relay_usedtoken")
    assert tokens_used == {"n": 10_000, "d": 10_000}

    latencies = [a.elapsed for a in answers]
    report(
        "load",
        callbacks=len(answers),
        distinct_callbacks=10_000,
        duplicates_sent=duplicates_sent,
        jobs_stored=len(rows),
        clients=CLIENTS,
        seconds_in_progress=round(seconds_a, 1),
        seconds_completed=round(seconds_b, 1),
        throughput_per_s=round(len(answers) / (seconds_a + seconds_b), 1),
        p50_ms=round(percentile(latencies, 0.5) * 1000, 1),
        p95_ms=round(percentile(latencies, 0.95) * 1000, 1),
        p99_ms=round(percentile(latencies, 0.99) * 1000, 1),
        max_ms=round(max(latencies) * 1000, 1),
        token_mint_seconds=round(mint_seconds, 1),
    )


def test_callbacks_on_the_embedded_defaults_store_exactly_the_expected_jobs(github, stack_factory, tmp_path):
    """The same, smaller, on what `make run` uses without Redis: one SQLite file, the local cache,
    gunicorn with one worker process (as runstack starts it): 1,000 callbacks from 8 clients."""
    commits, repos = 100, 20
    database = tmp_path / "embedded.sqlite3"
    env = relay_env(tmp_path, f"sqlite:///{database}", None, github)
    migrated = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert migrated.returncode == 0, migrated.stdout[-2000:] + migrated.stderr[-2000:]
    seed(
        env,
        {
            "projects": [
                {
                    "full_name": repo_name(j),
                    "github_repo_id": 710_000 + j,
                    "level": "L2",
                    "rate_limit_per_min": 1_000_000,
                }
                for j in range(repos)
            ],
            "deliveries": [
                {"delivery_id": f"load-{n:04d}", "event": "push", "head_sha": sha_for(f"load-commit-{n}")}
                for n in range(commits)
            ],
        },
    )
    traffic = Traffic(stack_factory(env).web(workers=1, threads=8))
    expected = jobs(commits, repos)
    assert len(expected) == 500
    began = time.monotonic()
    for status in ("in_progress", "completed"):

        def send(job, status=status):
            token = github.oidc.mint(repository=job["repo"], repository_id=str(job["repo_id"]), lifetime=1800)
            extra = completed_extra(job) if status == "completed" else {}
            body = callback_body(
                job["delivery"],
                status,
                run_id=job["run_id"],
                job=job["job"],
                conclusion=job["conclusion"],
                head_sha=job["sha"],
                **extra,
            )
            return traffic.callback(f"{job['index']}:{status}", body, token)

        traffic.run(send, expected, 8)
    seconds = time.monotonic() - began
    answers = traffic.answers
    assert Counter(a.status for a in answers) == {200: 1000}, Counter(
        (a.status, a.body.get("detail", "")[:60]) for a in answers
    )
    assert Counter(a.body["status"] for a in answers) == {"in_progress": 500, "completed": 500}
    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT j.delivery_key, p.full_name, j.run_id, j.job_name, j.status, j.conclusion, j.start_unknown FROM relay_jobrun j "
            "JOIN relay_project p ON p.id = j.project_id"
        ).fetchall()
    assert len(rows) == len({r[:4] for r in rows}) == 500
    assert {r[:4] for r in rows} == {(j["delivery"], j["repo"], j["run_id"], j["job"]) for j in expected}
    assert all(
        (r[4], r[5], r[6]) == ("completed", next(j["conclusion"] for j in expected if j["run_id"] == r[2]), 0)
        for r in rows
    )
    latencies = [a.elapsed for a in answers]
    report(
        "load-embedded",
        callbacks=len(answers),
        jobs_stored=len(rows),
        clients=8,
        seconds=round(seconds, 1),
        throughput_per_s=round(len(answers) / seconds, 1),
        p50_ms=round(percentile(latencies, 0.5) * 1000, 1),
        p99_ms=round(percentile(latencies, 0.99) * 1000, 1),
        max_ms=round(max(latencies) * 1000, 1),
    )
