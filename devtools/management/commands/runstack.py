"""`make run`: migrate, then run everything the app needs under one process group, so a single
Ctrl-C stops it all. Without GitHub App credentials (sandbox mode) it first starts the local
GitHub stand-in with simulated upstream and downstream activity, seeds the registry and an admin
account, and points the relay at the stand-in through the same settings production uses.

The terminal stays calm: what is starting, the URL, a line when the first results land and a
one-line summary a minute. Every process's full output goes to var/log/<name>.log either way;
`--logs` (`make run LOGS=1`) or an explicit LOG_LEVEL also streams it here."""

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from django.conf import settings
from django.core.management import BaseCommand, CommandError, call_command
from django.db import DatabaseError

from crcr.celery import DISPATCH_QUEUE, FOLLOW_UP_QUEUE, worker_command

from .seed_sandbox import sandbox_database_claim

STARTUP_TIMEOUT_SECONDS = 60
RESTARTABLE = ("worker", "worker-follow-up", "beat")
MAX_RESTARTS = 5
RESTART_WINDOW_SECONDS = 600
SUMMARY_EVERY_SECONDS = 60
ERROR_MARKERS = (b" ERROR ", b" CRITICAL ", b"Traceback (most recent call last)")
SANDBOX_ADMIN = "admin"


class Command(BaseCommand):
    help = "Run web (gunicorn), the Celery workers and beat — and, in sandbox mode, the GitHub stand-in and simulators."

    verbose = False
    log_dir: Path | None = None

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument(
            "--logs",
            action="store_true",
            help="also stream every process's full log here (LOG_LEVEL set does the same)",
        )

    def handle(self, *args, port, host, logs, **options):
        self.verbose = logs or bool(os.environ.get("LOG_LEVEL"))
        self.log_dir = Path(settings.VAR_DIR) / "log"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.children: list[subprocess.Popen] = []
        relay_url = f"http://{host}:{port}"
        self.say(
            f"CRCR HUD · {'sandbox mode (no GitHub App credentials: simulated GitHub and CI)' if settings.CRCR_SANDBOX else 'production mode'}"
        )
        self.prepare()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        try:
            if settings.CRCR_SANDBOX:
                env.update(self.start_sandbox(relay_url))
            self.start_services(env, host, port)
            self.wait_until_serving(host, port)
            self.announce(relay_url)
            self.supervise(relay_url)
        finally:
            self.stop_all()

    # --- the terminal --------------------------------------------------------------------------------

    def say(self, text: str, style=None) -> None:
        self.stdout.write((style or (lambda s: s))(text))
        self.stdout.flush()

    def step(self, text: str) -> None:
        self.say(f"  · {text}")

    def prepare(self) -> None:
        self.step("migrating the database")
        call_command("migrate", interactive=False, verbosity=0)
        if settings.CRCR_SANDBOX:
            sandbox_database_claim(force=settings.CRCR_SANDBOX_FORCE)  # before anything sandbox-shaped starts
        self.step("collecting and compressing static files")
        call_command("collectstatic", interactive=False, verbosity=0)

    def announce(self, relay_url: str) -> None:
        logs = ", ".join(f"{c.crcr_name}.log" for c in self.children)
        self.say("")
        self.say(f"  Open {relay_url}/   — Ctrl-C stops everything.", self.style.SUCCESS)
        for line in self.admin_lines(relay_url):
            self.say(f"  {line}")
        self.say(
            f"  Full logs: {shown(self.log_dir)}/ ({logs}){'' if self.verbose else '; make run LOGS=1 shows them here'}"
        )
        self.say("")

    def admin_lines(self, relay_url: str) -> list[str]:
        if getattr(self, "admin_password", None):
            return [
                f"Admin: {relay_url}/admin/  user {SANDBOX_ADMIN}  password {self.admin_password}  (sandbox only; kept in {shown(self.admin_password_file)})"
            ]
        if settings.CRCR_SANDBOX:
            return [
                f"Admin: {relay_url}/admin/ with your own account (`manage.py changepassword {SANDBOX_ADMIN}` resets the sandbox one)"
            ]
        return [f"Admin: {relay_url}/admin/ — create an account with `.venv/bin/python manage.py createsuperuser`"]

    # --- sandbox -------------------------------------------------------------------------------------

    def start_sandbox(self, relay_url: str) -> dict:
        state = Path(settings.VAR_DIR) / "sandbox"
        state.mkdir(parents=True, exist_ok=True)
        (state / "registry.json").unlink(missing_ok=True)
        (state / "standin.json").unlink(missing_ok=True)
        secret_file = self.secret_file(state)
        self.step("starting the GitHub stand-in and the simulated upstream and downstream CI")
        self.spawn(
            "standin",
            [
                sys.executable,
                "-m",
                "devtools.standin.sandbox",
                "--relay-url",
                relay_url,
                "--state-dir",
                str(state),
                "--webhook-secret-file",
                str(secret_file),
            ],
            os.environ,
        )
        info = self.wait_for_json(state / "standin.json")
        env = {
            "CRCR_SANDBOX": "1",
            "GITHUB_API_URL": info["url"],
            # The reference import reads upstream's S3 test reports from the stand-in's bucket.
            "CRCR_REFERENCE_ARTIFACT_BASE": f"{info['url']}/_s3/gha-artifacts",
            "GITHUB_APP_ID": str(info["app_id"]),
            "GITHUB_APP_PRIVATE_KEY_FILE": info["app_private_key_path"],
            "GITHUB_WEBHOOK_SECRET_FILE": str(secret_file),
            "CRCR_OIDC_ISSUERS": json.dumps(info["oidc_issuers"]),
            "CRCR_PUBLIC_URL": relay_url,
            # Make the sweeper's verdicts visible within minutes instead of hours.
            "CRCR_JOB_TIMEOUT_HOURS": "0.05",
            "CRCR_NEVER_STARTED_HOURS": "0.05",
            # The demotion loop decides every minute, so a failing backend's PR shows up soon; the
            # level criteria judge after 15 minutes of results instead of production's 3 days.
            "CRCR_DEMOTION_EVERY_SECONDS": "60",
            "CRCR_LEVEL_MIN_DATA_HOURS": "0.25",
            # A cause issue's day lasts two minutes: Qualcomm's mismatch opens its issue, grows it and,
            # once the scenario fixed it (devtools/standin/causes_sim.py), closes it within the demo.
            "CRCR_CAUSE_ISSUE_DAY_SECONDS": "120",
            # The stand-in process also runs a webhook sink: the seeded subscription posts there.
            "CRCR_SANDBOX_SINK_URL": info.get("sink_url", ""),
        }
        self.step("seeding the sandbox registry and admin account")
        self.seed(state, {**os.environ, **env})
        self.admin_password_file = state / "admin-password"
        self.admin_password = sandbox_admin(self.admin_password_file)
        return env

    def secret_file(self, state: Path) -> Path:
        path = state / "webhook-secret"
        if not path.exists():
            path.write_text(secrets.token_hex(24))
            path.chmod(0o600)
        return path

    def seed(self, state: Path, env: dict) -> None:
        with open(self.log_path("seed"), "ab") as log:
            subprocess.run(
                [sys.executable, "manage.py", "seed_sandbox"],
                env=env,
                check=True,
                cwd=settings.BASE_DIR,
                timeout=120,
                stdout=log,
                stderr=log,
            )
            dump = subprocess.run(
                [sys.executable, "manage.py", "sandbox_registry_dump"],
                env=env,
                check=True,
                cwd=settings.BASE_DIR,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                timeout=120,
            )
        partial = state / ".registry.json.tmp"
        partial.write_text(dump.stdout)
        partial.replace(state / "registry.json")

    def wait_for_json(self, path: Path) -> dict:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if path.exists():
                return json.loads(path.read_text())
            self.check_children()
            time.sleep(0.2)
        raise CommandError(f"{path} did not appear within {STARTUP_TIMEOUT_SECONDS} s")

    # --- services ------------------------------------------------------------------------------------

    def start_services(self, env: dict, host: str, port: int) -> None:
        # Without Redis the cache (and so the rate limiter) is per process: one web process,
        # many threads. With Redis, several processes share it.
        workers = "2" if settings.REDIS_URL else "1"
        self.step(
            f"starting the web server (gunicorn, {workers} process{'es' if workers != '1' else ''}), the Celery workers (sends; follow-ups) and Celery beat"
        )
        self.spawn(
            "web",
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "python:crcr.gunicorn_conf",  # the production timeouts; a quicker stop below
                "crcr.wsgi:application",
                "--bind",
                f"{host}:{port}",
                "--workers",
                workers,
                "--threads",
                "8",
                "--graceful-timeout",
                "5",
                "--access-logfile",
                "-",
            ],
            env,
        )
        self.spawn("worker", worker_command(DISPATCH_QUEUE), env)
        self.spawn("worker-follow-up", worker_command(FOLLOW_UP_QUEUE), env)
        self.spawn("beat", [sys.executable, "-m", "celery", "-A", "crcr", "beat", "--loglevel", "INFO"], env)

    def wait_until_serving(self, host: str, port: int) -> None:
        """The URL is printed once it answers, so the first click never meets a refused connection."""
        import socket

        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            self.check_children()
            try:
                with socket.create_connection((host, port), timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise CommandError(
            f"the web server did not listen on {host}:{port} within {STARTUP_TIMEOUT_SECONDS} s; see {self.log_path('web')}"
        )

    def log_path(self, name: str) -> Path:
        directory = self.log_dir or Path(settings.VAR_DIR) / "log"
        directory.mkdir(parents=True, exist_ok=True)
        return directory / f"{name}.log"

    def spawn(self, name: str, command: list[str], env) -> subprocess.Popen:
        child = subprocess.Popen(
            command, env=env, cwd=settings.BASE_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        child.crcr_name, child.crcr_spec, child.crcr_restarts, child.crcr_errors = name, (command, env), [], 0
        threading.Thread(target=self.pump, args=(child,), name=f"log-{name}", daemon=True).start()
        self.children.append(child)
        return child

    def pump(self, child) -> None:
        """Copy a child's output to its log file (and the terminal with --logs); count its errors
        so the summary line can point at the file. Reading the pipe is what keeps it from stalling."""
        with open(self.log_path(child.crcr_name), "ab") as log:
            log.write(
                f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {child.crcr_name} started (pid {child.pid})\n".encode()
            )
            for line in iter(child.stdout.readline, b""):
                log.write(line)
                log.flush()
                if self.verbose:
                    self.stdout.write(f"{child.crcr_name:>7} | {line.decode(errors='replace').rstrip()}")
                elif any(marker in line for marker in ERROR_MARKERS):
                    child.crcr_errors += 1

    def check_children(self) -> None:
        for child in list(self.children):
            if child.poll() is None:
                continue
            if child.crcr_name not in RESTARTABLE or not self.may_restart(child):
                raise CommandError(
                    f"{child.crcr_name} exited with status {child.returncode}; stopping everything (see {self.log_path(child.crcr_name)})"
                )
            self.say(f"{child.crcr_name} exited with status {child.returncode}; restarting it", self.style.WARNING)
            fresh = self.spawn(child.crcr_name, *child.crcr_spec)
            fresh.crcr_restarts = child.crcr_restarts + [time.monotonic()]
            fresh.crcr_errors = child.crcr_errors
            self.children.remove(child)

    def may_restart(self, child) -> bool:
        """A worker can die when the broker connection drops (Redis restarting): bring it back,
        but a crash loop stops everything instead of spinning."""
        recent = [t for t in child.crcr_restarts if time.monotonic() - t < RESTART_WINDOW_SECONDS]
        return len(recent) < MAX_RESTARTS

    def supervise(self, relay_url: str) -> None:
        stopping = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stopping.append(True))
        status = StatusReporter(self, relay_url)
        while not stopping:
            self.check_children()
            status.tick()
            time.sleep(0.5)
        self.say("stopping…")

    def stop_all(self) -> None:
        for child in reversed(self.children):
            if child.poll() is None:
                child.terminate()
        deadline = time.monotonic() + 10
        for child in self.children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()


class StatusReporter:
    """The calm part of the terminal: one line when the first results land (with the URL again),
    then a one-line summary a minute of what changed, read from the database the stack writes."""

    def __init__(self, command: Command, relay_url: str, every: float = SUMMARY_EVERY_SECONDS):
        self.command, self.relay_url, self.every = command, relay_url, every
        self.previous = self.counts()
        self.first_results_seen = bool(self.previous and self.previous["results"])
        self.next_summary = time.monotonic() + every
        self.next_poll = time.monotonic() + 5

    def counts(self) -> dict | None:
        from relay.selectors import activity_counts

        try:
            return activity_counts()
        except DatabaseError:
            return None

    def tick(self) -> None:
        now = time.monotonic()
        if now >= self.next_poll:
            self.next_poll = now + 5
            self.watch_first_results()
        if now >= self.next_summary:
            self.next_summary = now + self.every
            self.summarise()

    def watch_first_results(self) -> None:
        if self.first_results_seen:
            return
        counts = self.counts()
        if counts and counts["results"]:
            self.first_results_seen = True
            self.command.say(
                f"{clock()}  first results are in ({counts['results']} job{'s' if counts['results'] != 1 else ''} reported) — see them at {self.relay_url}/",
                self.command.style.SUCCESS,
            )

    def summarise(self) -> None:
        counts = self.counts()
        if counts is None:
            self.command.say(
                f"{clock()}  the database did not answer; see {self.command.log_path('web')}",
                self.command.style.WARNING,
            )
            return
        errors = {c.crcr_name: c.crcr_errors for c in self.command.children if c.crcr_errors}
        self.command.say(
            f"{clock()}  {summary_line(self.previous or counts, counts, errors, shown(self.command.log_path('x').parent))}"
        )
        self.previous = counts
        for child in self.command.children:
            child.crcr_errors = 0


def summary_line(before: dict, after: dict, errors: dict, log_dir: str = "var/log") -> str:
    """ "last minute: 3 webhooks · 12 dispatches · 20 callbacks · 0 dispatches given up · 0 errors
    logged", each failure saying what failed (a bare "0 failures" did not say of what), with where to
    look when a process logged errors."""
    delta = {
        key: max(0, after[key] - before.get(key, 0)) for key in ("webhooks", "dispatches", "callbacks", "failures")
    }
    logged = sum(errors.values())
    text = (
        f"last minute: {delta['webhooks']} webhooks · {delta['dispatches']} dispatches · {delta['callbacks']} callbacks"
        f" · {delta['failures']} dispatch{'es' if delta['failures'] != 1 else ''} given up"
        f" · {logged} error{'s' if logged != 1 else ''} logged"
    )
    if errors:
        text += " (in " + ", ".join(f"{log_dir}/{name}.log" for name in sorted(errors)) + ")"
    return text


def sandbox_admin(password_file: Path) -> str | None:
    """Sandbox only: an `admin` superuser with a generated password kept in var/sandbox (0600),
    so `make run` can say how to sign in. An account someone made or changed is left alone."""
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    user = users.filter(username=SANDBOX_ADMIN).first()
    if user is None:
        password = secrets.token_urlsafe(12)
        users.create_superuser(SANDBOX_ADMIN, "admin@sandbox.invalid", password)
        password_file.write_text(password)
        password_file.chmod(0o600)
        return password
    saved = password_file.read_text().strip() if password_file.exists() else ""
    return saved if saved and user.check_password(saved) else None


def shown(path: Path) -> str:
    """A path as the reader would type it from the checkout."""
    try:
        return str(Path(path).relative_to(settings.BASE_DIR))
    except ValueError:
        return str(path)


def clock() -> str:
    return time.strftime("%H:%M:%S")
