"""The public relay (pytorch/test-infra's cross_repo_ci_relay), run beside us for the one-client
callback figure: its local_server under uvicorn, one worker, from a directory outside this
repository with its own virtualenv (docs/performance.md, "The public relay, measured beside us").
Its code is never part of this repository; this module only starts and stops it."""

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .harness import Proc, _die_with_parent, free_port
from .load import wait_http

DIR_ENV = "CRCR_PUBLIC_RELAY_DIR"
BOOT = Path(__file__).with_name("public_relay_boot.py")
START_TIMEOUT = 60.0
REDIS_DB = 11
"""Its own Redis database, flushed at start: the relay keeps nothing else (in-memory, as measured)."""
ALLOWLIST_URL = "https://github.com/pytorch/pytorch/blob/main/.github/allowlist.yml"
PAIRS = 3


def relay_dir(given: str | None = None, environ=os.environ) -> tuple[Path | None, str]:
    """(the public relay's directory, "") when it can run here, else (None, why not)."""
    raw = given or environ.get(DIR_ENV, "")
    if not raw:
        return None, f"no public relay directory (--public-relay or {DIR_ENV})"
    path = Path(raw)
    for needed in ("local_server.py", "callback/lambda_function.py", ".venv/bin/python"):
        if not (path / needed).exists():
            return None, f"{path} is not runnable: {needed} is missing"
    return path, ""


def allowlist_yaml(l2_repos: list[str]) -> str:
    return "L2:\n" + "".join(f"  - {repo}\n" for repo in l2_repos)


@dataclass
class PublicRelay:
    """One run of the public relay's local_server; `stop()` ends it (callers do so in finally)."""

    proc: Proc
    base_url: str
    seed_path: Path

    @classmethod
    def start(cls, directory: Path, standin, l2_repos, dispatches, log_dir: Path) -> "PublicRelay":
        seed_path = _write_seed(standin, l2_repos, dispatches)
        port = free_port()
        proc = _spawn(directory, _env(seed_path, port), log_dir)
        relay = cls(proc, f"http://127.0.0.1:{port}", seed_path)
        try:
            wait_http(relay.base_url, path="/github/callback", timeout=START_TIMEOUT, alive=proc.alive)
        except BaseException as exc:
            relay.stop()
            raise RuntimeError(f"the public relay did not start: {exc}\n{proc.log_tail()}") from exc
        return relay

    def stop(self) -> None:
        self.proc.stop()
        self.seed_path.unlink(missing_ok=True)


def _write_seed(standin, l2_repos, dispatches) -> Path:
    github = next(i for i in standin.oidc.issuers_config() if i["kind"] == "github")
    seed = {
        "issuer": github["issuer"],
        "jwks_uri": github["jwks_uri"],
        "allowlist_yaml": allowlist_yaml(l2_repos),
        "dispatches": [list(pair) for pair in dispatches],
    }
    handle, name = tempfile.mkstemp(prefix="crcr-public-relay-", suffix=".json")
    with os.fdopen(handle, "w") as out:
        json.dump(seed, out)
    return Path(name)


def _env(seed_path: Path, port: int) -> dict:
    """Its settings, from its own variables: a placeholder GitHub App (its callback path for an
    L2 repo mints nothing), local Redis without a password, no HUD forward, a rate limit the
    single client cannot reach (ours is raised the same way for the benchmark's projects)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "GITHUB_APP_ID": "1",
        "GITHUB_APP_SECRET": "bench-placeholder",
        "GITHUB_APP_PRIVATE_KEY": "bench-placeholder",
        "REDIS_LOGIN": "default:",
        "REDIS_ENDPOINT": "127.0.0.1:6379",
        "ALLOWLIST_URL": ALLOWLIST_URL,
        "ALLOWLIST_TTL_SECONDS": "86400",
        "HUD_API_URL": "",
        "RATE_LIMIT_PER_MIN": "1000000",
        "CRCR_PR_SEED": str(seed_path),
        "CRCR_PR_PORT": str(port),
        "CRCR_PR_REDIS_DB": str(REDIS_DB),
    }


def _spawn(directory: Path, env: dict, log_dir: Path) -> Proc:
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / "public-relay.log"
    with open(path, "wb") as handle:
        popen = subprocess.Popen(
            [str(directory / ".venv/bin/python"), str(BOOT)],
            cwd=directory,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    return Proc("public-relay", popen, path)
