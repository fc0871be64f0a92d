"""`python -m standin`: run the stand-in as its own process (sandbox mode, benchmarks).

Writes <state-dir>/standin.json ({url, app_id, app_private_key_path, pid}) once it listens, and
keeps the App key in <state-dir>/app-key.pem so a restart keeps the key the relay already has."""

import argparse
import json
import os
import signal
import threading
from pathlib import Path

from .server import StandIn


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m standin", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--state-dir", default="var/standin", type=Path)
    parser.add_argument("--app-id", type=int, default=1001)
    return parser.parse_args(argv)


def _write_atomically(path: Path, text: str, mode: int = 0o644) -> None:
    # Readers poll for these files; they must never see half of one.
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(text)
    partial.chmod(mode)
    partial.replace(path)


def load_or_create(state_dir: Path, app_id: int) -> tuple[StandIn, Path]:
    key_path = state_dir / "app-key.pem"
    pem = key_path.read_text() if key_path.exists() else None
    standin = StandIn(app_id=app_id, app_private_key_pem=pem)
    if pem is None:
        _write_atomically(key_path, standin.app_private_key_pem, 0o600)
    return standin, key_path


def main(argv=None) -> int:
    args = parse_args(argv)
    args.state_dir.mkdir(parents=True, exist_ok=True)
    standin, key_path = load_or_create(args.state_dir, args.app_id)
    standin.start(args.host, args.port)
    info_path = args.state_dir / "standin.json"
    info = {
        "url": standin.url,
        "app_id": args.app_id,
        "app_private_key_path": str(key_path.resolve()),
        "pid": os.getpid(),
    }
    _write_atomically(info_path, json.dumps(info, indent=2) + "\n")
    print(f"standin listening on {standin.url}", flush=True)
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    while not stopping.wait(0.5):
        pass
    standin.stop()
    info_path.unlink(missing_ok=True)  # a stale file would point callers at a dead server
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
