"""The benchmark's own world: a dedicated database and Redis db, the web server (gunicorn), a
Celery worker and the GitHub stand-in. Everything started here is stopped again in `finally`, and
every wait has a timeout.

Two processes take part. `manage.py bench` (the parent) runs with the developer's settings but
never opens a database connection: it derives the benchmark target from DATABASE_URL/REDIS_URL,
creates the benchmark database (PostgreSQL `crcr_bench`, or var/bench/crcr_bench.sqlite3),
flushes the benchmark Redis db (15 unless CRCR_BENCH_REDIS_DB says otherwise), migrates, and then
runs `manage.py bench` again as a child with DATABASE_URL/REDIS_URL/CRCR_VAR_DIR pointing there.
The child is where the harness runs: its ORM talks to the benchmark database only."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from .load import wait_http

ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = ROOT / "var" / "bench"
CHILD_FLAG = "CRCR_BENCH_CHILD"
TARGET_ENV = "CRCR_BENCH_TARGET"
STAGES_ENV = "CRCR_BENCH_STAGES"
"""Set to 1: the web server times each step of a callback (devtools/bench/stages.py)."""
SECRET_KEY = "bench-only-secret-key-never-used-outside-the-benchmark-0123456789abcdef"
WEBHOOK_SECRET = "bench webhook secret"
APP_ID = 1001
STOP_TIMEOUT = 15.0
START_TIMEOUT = 90.0


@dataclass
class Target:
    """Where a benchmark run keeps its data."""

    name: str
    database_url: str
    vendor: str  # "sqlite" | "postgresql"
    redis_url: str | None
    var_dir: str

    @property
    def broker(self) -> str:
        return "redis" if self.redis_url else "embedded"

    @property
    def slug(self) -> str:
        return f"{self.name}-{self.vendor}-{self.broker}"

    @property
    def label(self) -> str:
        return f"{'PostgreSQL' if self.vendor == 'postgresql' else 'SQLite'} + {'Redis' if self.redis_url else 'embedded broker'}"

    def to_json(self) -> str:
        return json.dumps(vars(self))

    @classmethod
    def from_json(cls, text: str) -> "Target":
        return cls(**json.loads(text))


def target_for(environ, name: str = "crcr_bench") -> Target:
    """The benchmark twin of the configured database and Redis: same servers, own database / db."""
    source = environ.get("DATABASE_URL", "")
    if source and not source.startswith("sqlite"):
        parts = urlsplit(source)
        if parts.scheme not in ("postgres", "postgresql", "pgsql", "postgis"):
            raise SystemExit(f"bench supports SQLite and PostgreSQL, not {parts.scheme}")
        url, vendor = urlunsplit(parts._replace(path=f"/{name}")), "postgresql"
    else:
        url, vendor = f"sqlite:///{BENCH_DIR / f'{name}.sqlite3'}", "sqlite"
    redis = environ.get("REDIS_URL") or None
    if redis:
        redis = urlunsplit(urlsplit(redis)._replace(path=f"/{environ.get('CRCR_BENCH_REDIS_DB', '15')}"))
    var_dir = str(BENCH_DIR / f"var-{name}-{vendor}-{'redis' if redis else 'embedded'}")
    return Target(name, url, vendor, redis, var_dir)


LOCAL_POSTGRES = "postgres://postgres@127.0.0.1:5432/postgres"
LOCAL_REDIS = "redis://127.0.0.1:6379/0"


def both_targets(environ, name: str = "crcr_bench") -> list[tuple[Target, str]]:
    """The two configurations every target is judged in, each with why it cannot be measured
    here ("" when it can): SQLite + the embedded broker (no configuration), and PostgreSQL +
    Redis (DATABASE_URL/REDIS_URL when they name them, else the local servers)."""
    bare = {k: v for k, v in environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    database = environ.get("DATABASE_URL", "")
    served = {
        **bare,
        "DATABASE_URL": database if database and not database.startswith("sqlite") else LOCAL_POSTGRES,
        "REDIS_URL": environ.get("REDIS_URL") or LOCAL_REDIS,
    }
    servers = target_for(served, name)
    return [(target_for(bare, name), ""), (servers, _unreachable(servers))]


def _unreachable(target: Target) -> str:
    """Why PostgreSQL or Redis of the target cannot be reached, or ""."""
    for url, default_port in ((target.database_url, 5432), (target.redis_url, 6379)):
        parts = urlsplit(url)
        try:
            socket.create_connection((parts.hostname or "127.0.0.1", parts.port or default_port), timeout=2).close()
        except OSError as exc:
            return f"{parts.scheme} at {parts.hostname}:{parts.port or default_port} is not reachable ({exc})"
    return ""


BENCH_SETTINGS = "devtools.bench.settings"


def base_env(target: Target) -> dict:
    """The environment every benchmark process gets: the target, and nothing of the dev setup's."""
    # CRCR_BENCH_SETTINGS names another settings module for every benchmark process: a way to try
    # a settings change (e.g. the broker's polling interval) without editing crcr/settings.py.
    # The default is the product's settings plus the floor view (devtools/bench/settings.py); a
    # module of one's own should start with `from devtools.bench.settings import *`.
    settings_module = os.environ.get("CRCR_BENCH_SETTINGS", BENCH_SETTINGS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "CRCR_", "REDIS_URL", "DATABASE_URL"))}
    env.update(
        {
            "DATABASE_URL": target.database_url,
            "CRCR_VAR_DIR": target.var_dir,
            "SECRET_KEY": SECRET_KEY,
            "DEBUG": "0",
            "CRCR_SANDBOX": "0",
            "PYTHONUNBUFFERED": "1",
            "DJANGO_SETTINGS_MODULE": settings_module,
            TARGET_ENV: target.to_json(),
        }
    )
    if settings_module != BENCH_SETTINGS:
        env["CRCR_BENCH_SETTINGS"] = settings_module
    if target.redis_url:
        env["REDIS_URL"] = target.redis_url
    if os.environ.get(STAGES_ENV) == "1":
        env[STAGES_ENV] = "1"
    return env


# --- preparing the target (parent process, no Django database access) ---------------------------------


def target_prepare(target: Target, log=print) -> None:
    """A fresh database, an empty Redis db and broker folder, then `migrate`."""
    shutil.rmtree(target.var_dir, ignore_errors=True)
    Path(target.var_dir).mkdir(parents=True, exist_ok=True)
    if target.vendor == "sqlite":
        path = Path(target.database_url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    else:
        _pg_admin(target, f'DROP DATABASE IF EXISTS "{target.name}" WITH (FORCE)', f'CREATE DATABASE "{target.name}"')
    if target.redis_url:
        import redis

        redis.Redis.from_url(target.redis_url, socket_connect_timeout=2, socket_timeout=5).flushdb()
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=base_env(target),
        check=True,
        timeout=600,
    )
    log(
        f"bench database {target.label} ({_display(target.database_url)}) migrated in {time.monotonic() - started:.1f} s"
    )
    # Pages name hashed static files (the manifest storage production uses), so the manifest must exist.
    subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=base_env(target),
        check=True,
        timeout=600,
    )


def target_drop(target: Target) -> None:
    shutil.rmtree(target.var_dir, ignore_errors=True)
    shutil.rmtree(BENCH_DIR / f"logs-{target.slug}", ignore_errors=True)
    if target.vendor == "sqlite":
        path = target.database_url.removeprefix("sqlite:///")
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    else:
        _pg_admin(target, f'DROP DATABASE IF EXISTS "{target.name}" WITH (FORCE)')
    if target.redis_url:
        import redis

        redis.Redis.from_url(target.redis_url, socket_connect_timeout=2, socket_timeout=5).flushdb()


def _pg_admin(target: Target, *statements: str) -> None:
    import psycopg

    admin = urlunsplit(urlsplit(target.database_url)._replace(path="/postgres"))
    with psycopg.connect(admin.replace("postgres://", "postgresql://", 1), autocommit=True, connect_timeout=5) as conn:
        for statement in statements:
            conn.execute(statement)


def _display(url: str) -> str:
    parts = urlsplit(url)
    return (
        urlunsplit(parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else "")))
        if parts.hostname
        else url
    )


def run_child(target: Target, argv: list[str], timeout: float) -> int:
    """Run `manage.py bench <argv>` against the target; Ctrl-C reaches the child, which cleans up."""
    env = {**base_env(target), CHILD_FLAG: "1"}
    child = subprocess.Popen(
        [sys.executable, "manage.py", "bench", *argv], cwd=ROOT, env=env, preexec_fn=_die_with_parent
    )
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        return child.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait(timeout=10)
        raise SystemExit(f"bench did not finish within {timeout:.0f} s; stopped")
    except KeyboardInterrupt:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


# --- processes (child process) ---------------------------------------------------------------------------


def _die_with_parent() -> None:
    """Runs in the child between fork and exec: SIGTERM when the benchmark process dies, however
    it dies, so no server outlives a run."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def peak_rss_mb(pid: int) -> float | None:
    """VmHWM: the process's peak resident set size."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def children_of(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        return [int(p) for p in text.split()]
    except OSError:
        pass
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


@dataclass
class Proc:
    name: str
    popen: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM to the process group it leads (gunicorn's workers, too), then SIGKILL."""
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.popen.wait(timeout=10)
        # Group members that outlived their leader (never expected) go too.
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def sends_threads() -> int:
    """The send worker's threads as `make run` starts it (crcr.celery.WORKERS)."""
    from crcr.celery import DISPATCH_QUEUE, WORKERS

    return WORKERS[DISPATCH_QUEUE]


@dataclass
class ServiceConfig:
    web_workers: int
    web_threads: int = 8
    worker_concurrency: int = field(default_factory=sends_threads)

    def describe(self) -> dict:
        return {
            "web": f"gunicorn {self.web_workers} worker(s) × {self.web_threads} threads (gthread)",
            "worker": f"celery --pool threads --concurrency {self.worker_concurrency} (queue celery)"
            " + a follow-up worker --concurrency 8 (queue follow_up)",
        }


@dataclass
class Services:
    """gunicorn and a Celery worker against the target, pointed at the in-process stand-in."""

    target: Target
    config: ServiceConfig
    standin: object
    log_dir: Path
    log: object = print
    web: Proc | None = None
    worker: Proc | None = None
    follow_up_worker: Proc | None = None
    starting: list = field(default_factory=list)
    base_url: str = ""
    starts: dict = field(default_factory=dict)

    def env(self) -> dict:
        env = base_env(self.target)
        env.update(
            {
                "GITHUB_API_URL": self.standin.url,
                "GITHUB_APP_ID": str(self.standin.app_id),
                "GITHUB_APP_PRIVATE_KEY": self.standin.app_private_key_pem,
                "GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET,
                "CRCR_OIDC_ISSUERS": json.dumps(self.standin.oidc.issuers_config()),
                "CRCR_PUBLIC_URL": "http://127.0.0.1",
                "LOG_LEVEL": "INFO",
            }
        )
        return env

    def _spawn(self, name: str, command: list[str]) -> Proc:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        count = self.starts[name] = self.starts.get(name, 0) + 1
        path = self.log_dir / f"{name}-{count}.log"
        handle = open(path, "wb")
        try:
            popen = subprocess.Popen(
                command,
                cwd=ROOT,
                env=self.env(),
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            handle.close()
        return Proc(name, popen, path)

    # --- web ----------------------------------------------------------------------------------------

    def start_web(self) -> str:
        self.stop_web()
        for attempt in range(3):
            port = free_port()
            proc = self._spawn(
                "web",
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "-c",
                    "python:crcr.gunicorn_conf",  # production's worker class and bounds; the flags below win
                    "devtools.bench.wsgi:application",  # crcr.wsgi's, with the stage timer if asked
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    str(self.config.web_workers),
                    "--threads",
                    str(self.config.web_threads),
                    "--timeout",
                    "30",
                    "--graceful-timeout",
                    "5",
                    # No access log, as in production (crcr/gunicorn_conf.py): writing one line
                    # per request was ~7 % of the worker's busy time under one client (py-spy).
                ],
            )
            base = f"http://127.0.0.1:{port}"
            try:
                wait_http(base, timeout=START_TIMEOUT, alive=proc.alive)
            except (RuntimeError, TimeoutError) as exc:
                proc.stop()
                if attempt == 2:
                    raise RuntimeError(f"gunicorn did not start: {exc}\n{proc.log_tail()}") from exc
                continue
            except BaseException:
                proc.stop()
                raise
            self.web, self.base_url = proc, base
            self._wait_web_workers()
            return base
        raise AssertionError("unreachable")

    def _wait_web_workers(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while len(self.web_pids()) < self.config.web_workers:
            if time.monotonic() > deadline:
                raise RuntimeError("gunicorn did not start all its workers")
            time.sleep(0.1)

    def web_pids(self) -> list[int]:
        return children_of(self.web.pid) if self.web and self.web.alive() else []

    def stop_web(self) -> None:
        if self.web is not None:
            self.web.stop()
            self.web = None

    # --- worker -------------------------------------------------------------------------------------

    def start_worker(self) -> None:
        """The workers `make run` starts: one for the send path, one for what follows (reactions,
        upstream writes), each on its own queue (crcr/celery.py)."""
        from crcr.celery import DISPATCH_QUEUE, FOLLOW_UP_QUEUE

        self.stop_worker()
        self.worker = self._start_celery("worker", DISPATCH_QUEUE, self.config.worker_concurrency)
        self.follow_up_worker = self._start_celery("worker-follow-up", FOLLOW_UP_QUEUE, None)

    def _start_celery(self, name: str, queue: str, concurrency: int | None) -> Proc:
        from crcr.celery import worker_command

        proc = self._spawn(name, [*worker_command(queue, concurrency), "--without-heartbeat"])
        # registered by the caller at once: whatever happens next, close() stops it
        self.starting.append(proc)
        deadline = time.monotonic() + START_TIMEOUT
        while " ready." not in proc.log_tail(20000):
            if not proc.alive():
                raise RuntimeError(f"the Celery {name} exited while starting:\n{proc.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Celery {name} was not ready within {START_TIMEOUT:.0f} s:\n{proc.log_tail()}")
            time.sleep(0.2)
        self.starting.remove(proc)
        return proc

    def worker_procs(self) -> list[Proc]:
        return [p for p in (self.worker, self.follow_up_worker, *self.starting) if p is not None]

    def stop_worker(self) -> None:
        for proc in self.worker_procs():
            proc.stop()
        self.worker = self.follow_up_worker = None
        self.starting.clear()

    def purge_broker(self) -> int:
        """Drop queued messages (e.g. the fan-outs the intake benchmark published)."""
        from crcr.celery import app

        try:
            return app.control.purge() or 0
        except Exception as exc:  # noqa: BLE001 - best effort; the figures do not depend on it
            self.log(f"  (broker purge failed: {exc})")
            return 0

    def check_alive(self) -> None:
        for proc in (self.web, *self.worker_procs()):
            if proc is not None and not proc.alive():
                raise RuntimeError(f"{proc.name} exited with status {proc.popen.returncode}:\n{proc.log_tail()}")

    def close(self) -> None:
        for stop in (self.stop_worker, self.stop_web):
            try:
                stop()
            except Exception as exc:  # noqa: BLE001 - keep stopping the rest
                self.log(f"  (stopping failed: {exc})")


# --- how busy the machine was -------------------------------------------------------------------------------


def _cpu_totals() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return total - idle, total


def _proc_jiffies(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime (all threads)
    except (OSError, IndexError, ValueError):
        return 0


class MachineWatch:
    """What else the machine did while a figure ran. The benchmark's own processes are this one,
    gunicorn and its workers, the Celery worker and (PostgreSQL) the backends serving the
    benchmark database; everything else counts as foreign load."""

    def __init__(self, services: "Services"):
        self.services = services
        self.start: dict | None = None

    def own_pids(self) -> set[int]:
        pids = {os.getpid()}
        for proc in (self.services.web, *self.services.worker_procs()):
            if proc is not None and proc.alive():
                pids.add(proc.pid)
                pids.update(children_of(proc.pid))
        if self.services.target.vendor == "postgresql":
            pids.update(_pg_backends())
        return pids

    def snapshot(self) -> dict:
        busy, total = _cpu_totals()
        pids = self.own_pids()
        return {
            "busy": busy,
            "total": total,
            "own": {pid: _proc_jiffies(pid) for pid in pids},
            "load1": os.getloadavg()[0],
            "at": time.monotonic(),
        }

    def begin(self) -> None:
        self.start = self.snapshot()

    def cpu(self) -> dict[str, dict[int, float]]:
        """CPU seconds used so far by each process of each part of the benchmark: web (gunicorn),
        worker (Celery), db (PostgreSQL backends of the benchmark database; SQLite runs inside
        web) and bench (this process: the load generator and the stand-in)."""
        parts = {"bench": [os.getpid()], "web": [], "worker": [], "db": []}
        named = [("web", self.services.web), *(("worker", proc) for proc in self.services.worker_procs())]
        for name, proc in named:
            if proc is not None and proc.alive():
                parts[name] += [proc.pid, *children_of(proc.pid)]
        if self.services.target.vendor == "postgresql":
            parts["db"] = sorted(_pg_backends())
        tick = os.sysconf("SC_CLK_TCK")
        return {name: {pid: _proc_jiffies(pid) / tick for pid in pids} for name, pids in parts.items()}

    def report(self) -> dict:
        if self.start is None:
            return {}
        end = self.snapshot()
        elapsed_jiffies = max(1, end["total"] - self.start["total"])
        own = sum(max(0, end["own"].get(pid, 0) - self.start["own"].get(pid, 0)) for pid in end["own"])
        busy = end["busy"] - self.start["busy"]
        return {
            "load1_start": round(self.start["load1"], 2),
            "load1_end": round(end["load1"], 2),
            "cpu_busy_pct": round(100 * busy / elapsed_jiffies, 1),
            "foreign_cpu_pct": round(100 * max(0, busy - own) / elapsed_jiffies, 1),
            "seconds": round(end["at"] - self.start["at"], 1),
        }


def _pg_backends() -> set[int]:
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
            return {row[0] for row in cursor.fetchall()}
    except Exception:  # noqa: BLE001 - only a diagnostic
        return set()
