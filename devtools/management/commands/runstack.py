"""`make run`: migrate, then run everything the app needs under one process group, so a single
Ctrl-C stops it all. Without GitHub App credentials (sandbox mode) it first starts the local
GitHub stand-in with simulated upstream and downstream activity, seeds the registry, and points
the relay at the stand-in through the same settings production uses."""

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import BaseCommand, CommandError, call_command

from .seed_sandbox import sandbox_database_claim

STARTUP_TIMEOUT_SECONDS = 60
RESTARTABLE = ("worker", "beat")
MAX_RESTARTS = 5
RESTART_WINDOW_SECONDS = 600


class Command(BaseCommand):
    help = "Run web (gunicorn), Celery worker and beat — and, in sandbox mode, the GitHub stand-in and simulators."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))

    def handle(self, *args, port, host, **options):
        call_command("migrate", interactive=False, verbosity=0)
        if settings.CRCR_SANDBOX:
            sandbox_database_claim(force=settings.CRCR_SANDBOX_FORCE)  # before anything sandbox-shaped starts
        call_command("collectstatic", interactive=False, verbosity=0)
        self.children: list[subprocess.Popen] = []
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        relay_url = f"http://{host}:{port}"
        try:
            if settings.CRCR_SANDBOX:
                env.update(self.start_sandbox(relay_url))
            self.start_services(env, host, port)
            self.stdout.write(self.style.SUCCESS(f"CRCR HUD on {relay_url}/ {'(sandbox mode)' if settings.CRCR_SANDBOX else ''} — Ctrl-C stops everything"))
            self.supervise()
        finally:
            self.stop_all()

    # --- sandbox -------------------------------------------------------------------------------------

    def start_sandbox(self, relay_url: str) -> dict:
        state = Path(settings.VAR_DIR) / "sandbox"
        state.mkdir(parents=True, exist_ok=True)
        (state / "registry.json").unlink(missing_ok=True)
        (state / "standin.json").unlink(missing_ok=True)
        secret_file = self.secret_file(state)
        self.spawn("standin", [sys.executable, "-m", "devtools.standin.sandbox", "--relay-url", relay_url, "--state-dir", str(state), "--webhook-secret-file", str(secret_file)], os.environ)
        info = self.wait_for_json(state / "standin.json")
        env = {
            "CRCR_SANDBOX": "1", "GITHUB_API_URL": info["url"], "GITHUB_APP_ID": str(info["app_id"]),
            "GITHUB_APP_PRIVATE_KEY_FILE": info["app_private_key_path"], "GITHUB_WEBHOOK_SECRET_FILE": str(secret_file),
            "CRCR_OIDC_ISSUERS": json.dumps(info["oidc_issuers"]), "CRCR_PUBLIC_URL": relay_url,
            # Make the sweeper's verdicts visible within minutes instead of hours.
            "CRCR_JOB_TIMEOUT_HOURS": "0.05", "CRCR_NEVER_STARTED_HOURS": "0.05",
        }
        self.seed(state, {**os.environ, **env})
        return env

    def secret_file(self, state: Path) -> Path:
        path = state / "webhook-secret"
        if not path.exists():
            path.write_text(secrets.token_hex(24))
            path.chmod(0o600)
        return path

    def seed(self, state: Path, env: dict) -> None:
        subprocess.run([sys.executable, "manage.py", "seed_sandbox"], env=env, check=True, cwd=settings.BASE_DIR, timeout=120)
        dump = subprocess.run([sys.executable, "manage.py", "sandbox_registry_dump"], env=env, check=True, cwd=settings.BASE_DIR, capture_output=True, text=True, timeout=120)
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
        self.spawn("web", [sys.executable, "-m", "gunicorn", "crcr.wsgi:application", "--bind", f"{host}:{port}", "--workers", workers, "--threads", "8", "--timeout", "30", "--graceful-timeout", "5", "--access-logfile", "-"], env)
        self.spawn("worker", [sys.executable, "-m", "celery", "-A", "crcr", "worker", "--pool", "threads", "--concurrency", "16", "--loglevel", "INFO", "--without-gossip", "--without-mingle"], env)
        self.spawn("beat", [sys.executable, "-m", "celery", "-A", "crcr", "beat", "--loglevel", "INFO"], env)

    def spawn(self, name: str, command: list[str], env) -> subprocess.Popen:
        self.stdout.write(f"starting {name}: {' '.join(command[:6])}…")
        child = subprocess.Popen(command, env=env, cwd=settings.BASE_DIR)
        child.crcr_name, child.crcr_spec, child.crcr_restarts = name, (command, env), []
        self.children.append(child)
        return child

    def check_children(self) -> None:
        for index, child in enumerate(list(self.children)):
            if child.poll() is None:
                continue
            if child.crcr_name not in RESTARTABLE or not self.may_restart(child):
                raise CommandError(f"{child.crcr_name} exited with status {child.returncode}; stopping everything")
            self.stdout.write(self.style.WARNING(f"{child.crcr_name} exited with status {child.returncode}; restarting it"))
            fresh = self.spawn(child.crcr_name, *child.crcr_spec)
            fresh.crcr_restarts = child.crcr_restarts + [time.monotonic()]
            self.children.remove(child)

    def may_restart(self, child) -> bool:
        """A worker can die when the broker connection drops (Redis restarting): bring it back,
        but a crash loop stops everything instead of spinning."""
        recent = [t for t in child.crcr_restarts if time.monotonic() - t < RESTART_WINDOW_SECONDS]
        return len(recent) < MAX_RESTARTS

    def supervise(self) -> None:
        stopping = []
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stopping.append(True))
        while not stopping:
            self.check_children()
            time.sleep(0.5)

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
