"""The reliability suite's world: throwaway PostgreSQL and Redis servers of its own (never the shared
ones on 5432/6379, so stopping them disturbs nobody), the app as real processes (gunicorn and a
Celery worker, logs to files), a fast stand-in for Celery beat, and load clients.

Run as a script (`python tests/reliability/conftest.py seed < spec.json`) this module seeds a
target database through the ORM with the environment it is given."""

import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = "pytorch/pytorch"
UPSTREAM_ID = 65600975
WEBHOOK_SECRET = "reliability-webhook-secret-7c1f3a9e"
SECRET_KEY = "reliability-secret-key-" + "9" * 48
REDIS_SERVER = shutil.which("redis-server")


def pg_bin() -> Path | None:
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0
    )
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout: float, interval: float = 0.2) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return True
        except Exception:  # noqa: BLE001 - a probe that fails is a "not yet"
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


# --- throwaway servers ------------------------------------------------------------------------------


class RedisServer:
    """A private redis-server on a free port, in the foreground of a process we own."""

    def __init__(self, workdir: Path):
        self.port = free_port()
        self.dir = workdir
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        command = [
            REDIS_SERVER,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.dir),
            "--logfile",
            str(self.dir / "redis.log"),
            "--daemonize",
            "no",
        ]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        if not wait_until(self.ping, 15, 0.05):
            raise RuntimeError(f"redis-server on {self.port} did not start: {self.log()}")
        return self

    def ping(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")

    def stop(self) -> None:
        """Like `redis-cli shutdown nosave`: everything queued in it is gone."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def log(self) -> str:
        path = self.dir / "redis.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


class PostgresServer:
    """A private PostgreSQL cluster (initdb in a temp dir, run as `postgres` when we are root)."""

    def __init__(self):
        self.bin = pg_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="crcr-reliability-pg-"))
        self.data = self.dir / "data"
        self.port = free_port()
        self.as_owner: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
            self.as_owner = ["runuser", "-u", "postgres", "--"]
        os.chmod(self.dir, 0o755)
        (self.dir / OWNER_FILE).write_text(str(os.getpid()))  # lets a later session reap it if this one is killed
        self._tool(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"
        )

    def _tool(self, tool: str, *args, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        result = subprocess.run(
            [*self.as_owner, str(self.bin / tool), *args], capture_output=True, text=True, timeout=timeout
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"{tool} failed ({result.returncode}): {result.stdout[-1500:]} {result.stderr[-1500:]} {self.log()}"
            )
        return result

    def start(self) -> "PostgresServer":
        # fsync off is safe here: only the server process is ever crashed, never the OS, and WAL is
        # still written to the kernel at every commit (synchronous_commit stays on).
        options = (
            f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off "
            "-c max_connections=200 -c shared_buffers=64MB"
        )
        self._tool(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "server.log"), "-w", "-t", "60", "start"
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        self._tool("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop", check=False)

    @property
    def running(self) -> bool:
        return self._tool("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def destroy(self) -> None:
        try:
            self.stop("immediate")
        except Exception:  # noqa: BLE001 - fall through to the postmaster's own pid
            pass
        postmaster = self.data / "postmaster.pid"
        if postmaster.exists():
            try:
                os.kill(
                    int(postmaster.read_text().split()[0]), signal.SIGQUIT
                )  # the server we started: immediate shutdown
            except (OSError, ValueError, IndexError):
                pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres"):
        import psycopg
        from psycopg.rows import dict_row

        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user="postgres",
            dbname=database,
            autocommit=True,
            connect_timeout=5,
            row_factory=dict_row,
        )

    def query(self, database: str, sql: str, params=()) -> list[dict]:
        with self.connect(database) as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description else []

    def log(self) -> str:
        path = self.dir / "server.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


OWNER_FILE = "owner.pid"


def reap_orphaned_clusters() -> list[str]:
    """Private clusters whose pytest session died without its teardown (killed): stop and remove
    them. Only directories this fixture made and marked with a now-dead owner pid are touched."""
    reaped = []
    for directory in Path(tempfile.gettempdir()).glob("crcr-reliability-pg-*"):
        try:
            owner = int((directory / OWNER_FILE).read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(owner, 0)
            continue  # its session is alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        server = PostgresServer.__new__(PostgresServer)
        server.bin, server.dir, server.data = pg_bin(), directory, directory / "data"
        server.as_owner = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        server.destroy()
        reaped.append(directory.name)
    return reaped


def base_env(var_dir: Path, database_url: str, redis_url: str | None = None) -> dict:
    # DJANGO_ALLOW_ASYNC_UNSAFE is set by the browser tests for themselves; no server gets it.
    dropped = ("DATABASE_URL", "REDIS_URL", "DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith(("GITHUB_", "CRCR_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="crcr.settings",
        DATABASE_URL=database_url,
        CRCR_VAR_DIR=str(var_dir),
        CRCR_SANDBOX="0",
        SECRET_KEY=SECRET_KEY,
        PYTHONUNBUFFERED="1",
        LOG_LEVEL="INFO",
        CRCR_UPSTREAM_REPO=UPSTREAM,
    )
    if redis_url:
        env["REDIS_URL"] = redis_url
    return env


@pytest.fixture(scope="session")
def pg_server():
    """One private cluster for the session, with a migrated template database to clone per test."""
    if pg_bin() is None or not (pg_bin() / "pg_ctl").exists():
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed: apt-get install postgresql")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: cannot start a private PostgreSQL as the postgres user")
    reap_orphaned_clusters()
    server = PostgresServer().start()
    try:
        server.query("postgres", "CREATE DATABASE crcr_template")
        var_dir = Path(tempfile.mkdtemp(prefix="crcr-reliability-migrate-"))
        result = subprocess.run(
            [sys.executable, "manage.py", "migrate", "--noinput"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=base_env(var_dir, server.url("crcr_template")),
            timeout=240,
        )
        shutil.rmtree(var_dir, ignore_errors=True)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        yield server
    finally:
        server.destroy()


_db_numbers = iter(range(1, 10_000))


@pytest.fixture
def pg_database(pg_server):
    """A fresh, migrated database on the private cluster: its name."""
    if not pg_server.running:
        pg_server.start()  # a fault test that failed midway may have left it stopped
    name = f"crcr_rel_{os.getpid()}_{next(_db_numbers)}"
    pg_server.query("postgres", f"CREATE DATABASE {name} TEMPLATE crcr_template")
    yield name
    if not pg_server.running:
        pg_server.start()
    pg_server.query("postgres", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def redis_server(tmp_path):
    if REDIS_SERVER is None:
        pytest.skip("redis-server is not installed: apt-get install redis-server")
    workdir = tmp_path / "redis"
    workdir.mkdir()
    server = RedisServer(workdir).start()
    yield server
    server.stop()


# --- the GitHub stand-ins -------------------------------------------------------------------------


@pytest.fixture
def github():
    """The GitHub REST stand-in the relay's processes talk to."""
    from devtools.standin import StandIn

    stand = StandIn(app_id=1001).start()
    yield stand
    stand.stop()


@pytest.fixture
def issuers():
    """A second stand-in serving only the OIDC issuers, so GitHub can go down without taking the
    callback key servers with it."""
    from devtools.standin import StandIn

    stand = StandIn(app_id=1002).start()
    yield stand
    stand.stop()


# --- the app as real processes ----------------------------------------------------------------------

BEAT_SCRIPT = r"""
import os, sys, time
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crcr.settings")
import django
django.setup()
from crcr.celery import app
interval, names = float(sys.argv[1]), sys.argv[2:]
while True:
    for name in names:
        try:
            app.send_task(name)
        except Exception as exc:
            print(f"fast-beat: could not publish {name}: {exc.__class__.__name__}: {exc}", flush=True)
    time.sleep(interval)
"""


class Stack:
    """gunicorn, Celery workers and a fast beat as subprocesses in their own sessions, each logging
    to a file (never an unread pipe)."""

    def __init__(self, var_dir: Path, env: dict):
        self.var_dir, self.env = var_dir, env
        self.processes: dict[str, subprocess.Popen] = {}
        self.url: str | None = None
        self._logs: list = []
        self._workers = 0
        self._worker_env: dict[str, dict] = {}
        self._supervising = threading.Event()
        self.restarts: list[dict] = []

    def _spawn(self, name: str, args: list[str], extra_env: dict | None = None) -> subprocess.Popen:
        log = (self.var_dir / f"{name}.log").open("ab")
        self._logs.append(log)
        process = subprocess.Popen(
            [sys.executable, *args],
            cwd=ROOT,
            env={**self.env, **(extra_env or {})},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes[name] = process
        return process

    def web(self, workers: int = 2, threads: int = 8, name: str = "web", **extra_env) -> str:
        """A gunicorn master with its workers; a second one (another `name`) is another host."""
        import httpx

        port = free_port()
        self._spawn(
            name,
            [
                "-m",
                "gunicorn",
                "crcr.wsgi:application",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(workers),
                "--threads",
                str(threads),
                "--timeout",
                "90",
                "--graceful-timeout",
                "5",
                "--keep-alive",
                "10",
            ],
            extra_env,
        )
        url = f"http://127.0.0.1:{port}"
        self.url = self.url or url
        if not wait_until(lambda: httpx.get(f"{url}/healthz", timeout=5).status_code in (200, 503), 60, 0.3):
            raise RuntimeError(f"gunicorn did not come up:\n{self.log(name)}")
        return url

    def worker(self, concurrency: int = 8, wait: bool = True, **extra_env) -> subprocess.Popen:
        self._workers += 1
        name = f"worker{self._workers}"
        process = self._spawn(
            name,
            [
                "-m",
                "celery",
                "-A",
                "crcr",
                "worker",
                "--pool",
                "threads",
                "--concurrency",
                str(concurrency),
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "--loglevel",
                "INFO",
                "-n",
                f"{name}-{os.getpid()}@%h",
            ],
            extra_env,
        )
        self._worker_env[name] = {"concurrency": concurrency, **extra_env}
        if wait and not wait_until(lambda: " ready." in self.log(name, 10**6) or process.poll() is not None, 60, 0.2):
            raise RuntimeError(f"the Celery worker did not come up:\n{self.log(name)}")
        if process.poll() is not None:
            raise RuntimeError(f"the Celery worker exited ({process.returncode}):\n{self.log(name)}")
        return process

    def supervise_workers(self) -> None:
        """Restart a worker that exits by itself, as docker-compose.yml's `restart: unless-stopped`
        does in production; every restart is recorded in `restarts`."""

        def watch():
            while not self._supervising.wait(0.5):
                for name, options in list(self._worker_env.items()):
                    process = self.processes[name]
                    if process.poll() is not None and not options.get("_done"):
                        options["_done"] = True
                        self.restarts.append(
                            {
                                "worker": name,
                                "exit": process.returncode,
                                "at": time.time(),
                                "why": _last_error_line(self.log(name, 20_000)),
                            }
                        )
                        self.worker(wait=False, **{k: v for k, v in options.items() if not k.startswith("_")})

        threading.Thread(target=watch, name="supervisor", daemon=True).start()

    def beat(self, interval: float = 2.0, tasks=("relay.dispatch_sweep",)) -> subprocess.Popen:
        """Celery beat runs the sweepers every minute; tests publish them every few seconds."""
        return self._spawn("beat", ["-c", BEAT_SCRIPT, str(interval), *tasks])

    def celery_beat(self, name: str = "celerybeat") -> subprocess.Popen:
        """The real Celery beat, as production runs it (the scheduler from settings); ready once it
        has loaded its schedule and written it back to the database (its first sync)."""
        process = self._spawn(
            name,
            ["-m", "celery", "-A", "crcr", "beat", "--loglevel", "DEBUG", "--pidfile", "", "--max-interval", "1"],
        )
        if not wait_until(lambda: "Writing entries" in self.log(name, 10**6) or process.poll() is not None, 60, 0.2):
            raise RuntimeError(f"Celery beat did not come up:\n{self.log(name)}")
        if process.poll() is not None:
            raise RuntimeError(f"Celery beat exited ({process.returncode}):\n{self.log(name)}")
        return process

    def stop_process(self, name: str, sig=signal.SIGTERM, timeout: float = 20) -> None:
        process = self.processes.get(name)
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        except ProcessLookupError:
            pass

    def kill(self, name: str) -> None:
        """SIGKILL: no warm shutdown, no acks, no cleanup."""
        self._worker_env.get(name, {})["_done"] = True  # deliberate: the supervisor leaves it dead
        process = self.processes[name]
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def alive(self, name: str) -> bool:
        process = self.processes.get(name)
        return process is not None and process.poll() is None

    def log(self, name: str, tail: int = 6000) -> str:
        path = self.var_dir / f"{name}.log"
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"===== {name} =====\n{self.log(name, 3000)}" for name in self.processes)

    def stop(self) -> None:
        self._supervising.set()
        for name in list(self.processes):
            self.stop_process(name)
        for log in self._logs:
            log.close()


def _last_error_line(log: str) -> str:
    lines = [line for line in log.splitlines() if "CRITICAL" in line or "Unrecoverable" in line]
    return (lines[-1] if lines else (log.strip().splitlines() or [""])[-1])[:300]


def relay_env(var_dir: Path, database_url: str, redis_url: str | None, github, issuers=None, **extra) -> dict:
    env = base_env(var_dir, database_url, redis_url)
    env.update(
        GITHUB_API_URL=github.url,
        GITHUB_APP_ID=str(github.app_id),
        GITHUB_APP_PRIVATE_KEY=github.app_private_key_pem,
        GITHUB_WEBHOOK_SECRET=WEBHOOK_SECRET,
        CRCR_OIDC_ISSUERS=json.dumps((issuers or github).oidc.issuers_config()),
        CRCR_OIDC_JWKS_COOLDOWN_SECONDS="0",
        GITHUB_HTTP_TIMEOUT="10",
        # These loads send a thousand dispatches a minute through one installation, five times what
        # GitHub's secondary limit allows (relay/github/ratelimit.py would spread them over minutes,
        # as it must in production); the stand-in has no limit, and these tests are about faults.
        GITHUB_WRITE_POINTS_PER_MINUTE="1000000",
        GITHUB_WRITE_BURST_POINTS="1000000",
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


@pytest.fixture
def stack_factory(tmp_path):
    stacks: list[Stack] = []

    def make(env: dict) -> Stack:
        stack = Stack(tmp_path, env)
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.stop()


# --- downstream repos on the stand-in ---------------------------------------------------------------


def downstream(github, count: int, prefix: str, level: str = "L2", first_id: int = 720_000) -> list[dict]:
    """Repos with the App installed, registered as projects."""
    github.add_installation(installation_id=7, account=f"{prefix}-org")
    repos = []
    for i in range(count):
        name = f"{prefix}-org-{i}/torch-backend"
        github.add_repo(name, repo_id=first_id + i, installation_id=7)
        repos.append(
            {
                "full_name": name,
                "github_repo_id": first_id + i,
                "level": level,
                "hardware_kind": "gpu",
                "rate_limit_per_min": 100_000,
            }
        )
    return repos


def standin_deliveries(github) -> Counter:
    return Counter((d["client_payload"]["delivery_id"], d["repo"].lower()) for d in github.dispatches)


# --- seeding a target database through the ORM, in a subprocess ----------------------------------


def seed(env: dict, spec: dict, timeout: float = 180) -> dict:
    result = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "seed"],
        cwd=ROOT,
        env=env,
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _seed_main(spec: dict) -> dict:
    """projects: Project fields; deliveries: [{delivery_id, event, head_sha, pr_number?}], each
    dispatched to every project and marked sent; installations: [[installation_id, [repo, ...]]];
    periodic: extra beat entries (`periodic_tasks_add`)."""
    import django

    django.setup()
    from django.db import transaction
    from django.utils import timezone

    from relay.models import Delivery, Dispatch, Project

    now = timezone.now()
    with transaction.atomic():
        projects = [Project.objects.create(**fields) for fields in spec.get("projects", [])]
        deliveries = Delivery.objects.bulk_create(
            [
                Delivery(
                    guid=d["delivery_id"],
                    event=d.get("event", "push"),
                    action=d.get("action", ""),
                    outcome="relayed",
                    repo_full_name=UPSTREAM,
                    pr_number=d.get("pr_number"),
                    head_sha=d["head_sha"],
                    ref="refs/heads/main",
                    payload=d.get("payload") or {},
                    received_at=now,
                )
                for d in spec.get("deliveries", [])
            ],
            batch_size=1000,
        )
        targets = projects if spec.get("dispatch_all", True) else []
        Dispatch.objects.bulk_create(
            [
                Dispatch(
                    delivery=d,
                    project=p,
                    state="sent",
                    attempts=1,
                    sent_at=now,
                    event_type=d.event,
                    pr_number=d.pr_number,
                    head_sha=d.head_sha,
                    next_attempt_at=now,
                    created_at=now,
                )
                for d in deliveries
                for p in targets
            ],
            batch_size=2000,
        )
    periodic_tasks_add(spec.get("periodic", []))
    return {
        "projects": {p.full_name: p.pk for p in projects},
        "deliveries": len(deliveries),
        "dispatches": len(deliveries) * len(targets),
    }


def periodic_tasks_add(entries: list[dict]) -> None:
    """Beat entries beside the ones in crcr/celery.py, as an admin adds them (django_celery_beat
    rows): [{name, task, every (seconds)}]."""
    from django_celery_beat.models import IntervalSchedule, PeriodicTask

    for entry in entries:
        interval, _ = IntervalSchedule.objects.get_or_create(every=entry["every"], period=IntervalSchedule.SECONDS)
        PeriodicTask.objects.create(name=entry["name"], task=entry["task"], interval=interval)


# --- talking to the relay like GitHub and downstream CI do ------------------------------------------


def sha_for(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def signed(body: bytes, secret: str = WEBHOOK_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def webhook_request(event: str, payload: dict, delivery_id: str) -> tuple[dict, bytes]:
    body = json.dumps(payload).encode()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id,
        "X-Hub-Signature-256": signed(body),
        "User-Agent": "GitHub-Hookshot/reliability",
    }
    return headers, body


def push_payload(sha: str, before: str = "0" * 40, title: str = "Reliability commit") -> dict:
    return {
        "ref": "refs/heads/main",
        "before": before,
        "after": sha,
        "created": False,
        "deleted": False,
        "forced": False,
        "repository": {
            "id": UPSTREAM_ID,
            "full_name": UPSTREAM,
            "name": "pytorch",
            "default_branch": "main",
            "owner": {"login": "pytorch"},
        },
        "sender": {"login": "pytorchbot"},
        "head_commit": {
            "id": sha,
            "message": title,
            "timestamp": "2026-12-02T10:00:00Z",
            "author": {"name": "bot", "username": "pytorchbot"},
        },
        "commits": [
            {
                "id": sha,
                "message": title,
                "timestamp": "2026-12-02T10:00:00Z",
                "author": {"name": "bot", "username": "pytorchbot"},
            }
        ],
    }


def pr_payload(number: int, head_sha: str, action: str = "opened", title: str = "Reliability PR", labels=()) -> dict:
    repo = {
        "id": UPSTREAM_ID,
        "full_name": UPSTREAM,
        "name": "pytorch",
        "default_branch": "main",
        "owner": {"login": "pytorch"},
    }
    return {
        "action": action,
        "number": number,
        "repository": repo,
        "sender": {"login": "contributor"},
        "pull_request": {
            "number": number,
            "title": title,
            "state": "open",
            "user": {"login": "contributor"},
            "labels": [{"name": n} for n in labels],
            "head": {"sha": head_sha, "ref": f"feature-{number}", "repo": {"full_name": UPSTREAM, "id": UPSTREAM_ID}},
            "base": {"ref": "main", "sha": "0" * 40, "repo": repo},
            "updated_at": "2026-12-02T10:00:00Z",
        },
    }


def callback_body(
    delivery_id: str,
    status: str,
    *,
    run_id: str,
    job: str,
    conclusion: str | None = None,
    event_type: str = "push",
    head_sha: str = "",
    pr_number: int | None = None,
    callback_token: str | None = None,
    **workflow_extra,
) -> dict:
    """What the cross-repo-ci-relay-callback action (plus our optional fields) posts."""
    payload = (
        {"after": head_sha}
        if event_type == "push"
        else {"number": pr_number, "pull_request": {"number": pr_number, "head": {"sha": head_sha}}}
    )
    body = {
        "event_type": event_type,
        "delivery_id": delivery_id,
        "payload": payload,
        "workflow": {
            "schema_version": "1",
            "status": status,
            "conclusion": conclusion if status == "completed" else None,
            "name": "reliability-ci",
            "run_id": run_id,
            "run_attempt": "1",
            "job_name": job,
            "url": f"https://ci.example.org/runs/{run_id}",
            **workflow_extra,
        },
    }
    if callback_token:
        body["callback_token"] = callback_token
    return body


@dataclass
class Answer:
    kind: str
    key: str
    status: int | None
    body: dict = field(default_factory=dict)
    headers: dict = field(default_factory=dict)
    at: float = 0.0
    elapsed: float = 0.0
    error: str = ""


class Traffic:
    """Concurrent HTTP clients (one keep-alive connection per thread) that record every answer."""

    def __init__(self, base_url: str, timeout: float = 30.0):
        self.base_url, self.timeout = base_url, timeout
        self.answers: list[Answer] = []
        self._lock = threading.Lock()
        self._local = threading.local()

    def _client(self):
        import httpx

        if not hasattr(self._local, "client"):
            self._local.client = httpx.Client(base_url=self.base_url, timeout=self.timeout)
        return self._local.client

    def post(self, kind: str, key: str, path: str, body: bytes, headers: dict) -> Answer:
        import httpx

        started, at = time.monotonic(), time.time()
        try:
            response = self._client().post(path, content=body, headers=headers)
            try:
                data = response.json()
            except ValueError:
                data = {"raw": response.text[:300]}
            answer = Answer(
                kind,
                key,
                response.status_code,
                data if isinstance(data, dict) else {"raw": data},
                {k.lower(): v for k, v in response.headers.items()},
                at,
                time.monotonic() - started,
            )
        except httpx.HTTPError as exc:
            answer = Answer(
                kind, key, None, at=at, elapsed=time.monotonic() - started, error=f"{exc.__class__.__name__}: {exc}"
            )
        with self._lock:
            self.answers.append(answer)
        return answer

    def webhook(self, event: str, payload: dict, delivery_id: str) -> Answer:
        headers, body = webhook_request(event, payload, delivery_id)
        return self.post("webhook", delivery_id, "/github/webhook", body, headers)

    def callback(self, key: str, body: dict, token: str) -> Answer:
        headers = {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {token}",
            "User-Agent": "crcr-reliability",
        }
        return self.post("callback", key, "/github/callback", json.dumps(body).encode(), headers)

    def run(self, fn, items, threads: int) -> list:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="traffic") as pool:
            return list(pool.map(fn, items))

    def of(self, kind: str) -> list[Answer]:
        with self._lock:
            return [a for a in self.answers if a.kind == kind]

    def statuses(self, kind: str) -> Counter:
        return Counter(a.status for a in self.of(kind))


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def report(name: str, **measured) -> None:
    """Measured numbers, printed (shown with -s or -rA) and appended to var/reliability/results.jsonl."""
    line = json.dumps(
        {"scenario": name, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **measured}, default=str
    )
    print(f"\n[reliability] {line}")
    out = ROOT / "var" / "reliability"
    out.mkdir(parents=True, exist_ok=True)
    with (out / "results.jsonl").open("a") as fh:
        fh.write(line + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:] != ["seed"]:
        raise SystemExit("usage: conftest.py seed < spec.json")
    print(json.dumps(_seed_main(json.loads(sys.stdin.read()))))
