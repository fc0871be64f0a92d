"""The table printed at the end of a run and var/bench/results.json: every figure with its value,
unit, target, verdict, configuration (database, broker, cores, …), date and git SHA."""

import json
import os
import platform
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from .figures import Result
from .harness import ROOT, Target


def git_state() -> dict:
    def git(*args) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {
        "sha": git("rev-parse", "HEAD") or "unknown",
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def database_version() -> str:
    from django.db import connection

    if connection.vendor == "sqlite":
        import sqlite3

        return f"SQLite {sqlite3.sqlite_version}"
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        return f"PostgreSQL {cursor.fetchone()[0]}"


def broker_version(target: Target) -> str:
    if not target.redis_url:
        return "embedded (kombu filesystem transport, crcrfs://)"
    try:
        import redis

        info = redis.Redis.from_url(target.redis_url, socket_connect_timeout=2, socket_timeout=5).info("server")
        return f"Redis {info.get('redis_version', '?')}"
    except Exception:  # noqa: BLE001
        return "Redis"


def cpu_calibration_ms(repeat: int = 3) -> float:
    """Thread CPU time of a fixed pure-Python loop (best of `repeat`): how fast this machine's
    cores were during the run. On shared virtual machines it varies; compare runs with it."""
    best = None
    for _ in range(repeat):
        started, total = time.thread_time(), 0
        for i in range(3_000_000):
            total += i * i
        spent = (time.thread_time() - started) * 1000
        best = spent if best is None else min(best, spent)
    return round(best, 1)


def configuration(target: Target, services_config: dict, profile: str, calibration: dict | None = None) -> dict:
    return {
        "database": database_version(),
        "broker": broker_version(target),
        "cache": "Redis" if target.redis_url else "local memory (per process)",
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "profile": profile,
        **services_config,
        "cpu_calibration_ms": calibration or {},
    }


def results_write(
    results: list[Result], config: dict, started: datetime, seconds: float, path: Path, extra_paths=()
) -> dict:
    git = git_state()
    date = started.astimezone(UTC).isoformat(timespec="seconds")
    figures = []
    for r in results:
        figures.append(
            {
                "figure": r.key,
                "label": r.label,
                "value": r.value,
                "unit": r.unit,
                "target": r.target,
                "verdict": r.verdict,
                "status": r.status,
                "configuration": config,
                "date": date,
                "git_sha": git["sha"],
                "details": r.details,
            }
        )
    document = {
        "date": date,
        "git_sha": git["sha"],
        "git_dirty": git["dirty"],
        "configuration": config,
        "duration_s": round(seconds, 1),
        "load_average_end": [round(v, 2) for v in os.getloadavg()],
        "figures": figures,
    }
    text = json.dumps(document, indent=2, default=str) + "\n"
    for out in (path, *extra_paths):
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(f".{out.name}.tmp")
        partial.write_text(text)
        partial.replace(out)
    return document


def table(results: list[Result], config: dict) -> str:
    rows = [("figure", "value", "unit", "target", "verdict", "other CPU")]
    for r in results:
        value = "—" if r.value is None else f"{r.value:,}" if isinstance(r.value, int) else f"{r.value:,.2f}"
        verdict = r.verdict if r.status == "measured" else r.status
        foreign = (r.details.get("machine") or {}).get("foreign_cpu_pct")
        rows.append((r.label, value, r.unit, r.target, verdict, "" if foreign is None else f"{foreign:.0f} %"))
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    calibration = config.get("cpu_calibration_ms") or {}
    lines = [
        f"{config['database']} · {config['broker']} · {config['cores']} cores · {config['web']} · {config['worker']}"
        f" · CPU calibration {calibration.get('start', '?')} / {calibration.get('end', '?')} ms (start / end)",
        "(other CPU: share of the machine's CPU used by processes outside the benchmark while the figure ran)",
    ]
    for k, row in enumerate(rows):
        lines.append(
            "  ".join(
                cell.ljust(w) if i != 1 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))
            ).rstrip()
        )
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def results_read(path: Path) -> dict | None:
    """A results file written by `results_write`, or None when the run wrote none."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


VERDICT_MARKS = {"met": "✅", "missed": "❌"}


def side_by_side(documents: dict[str, dict | None]) -> str:
    """One row per figure, one column per configuration: value, target and verdict, so every
    target's verdict in both configurations reads off one table."""
    labels, cells = {}, {}
    for config, document in documents.items():
        for f in (document or {}).get("figures", []):
            labels.setdefault(f["figure"], f["label"])
            cells[(f["figure"], config)] = _cell(f)
    missing = {config: "not measured" for config, document in documents.items() if document is None}
    rows = [("figure", *documents)]
    rows += [(label, *(cells.get((key, c), missing.get(c, "—")) for c in documents)) for key, label in labels.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["Every figure in both configurations (value, target, verdict):"]
    for k, row in enumerate(rows):
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    met = sum(1 for cell in cells.values() if cell.endswith(VERDICT_MARKS["met"]))
    judged = sum(1 for cell in cells.values() if cell.endswith(tuple(VERDICT_MARKS.values())))
    lines.append(f"targets met: {met} of {judged} judged")
    return "\n".join(lines)


def _cell(figure: dict) -> str:
    value = figure["value"]
    if figure["status"] != "measured" or value is None:
        return figure["status"]
    shown = f"{value:,}" if isinstance(value, int) else f"{value:,.2f}"
    target = f" ({figure['target']})" if figure["target"] else ""
    mark = VERDICT_MARKS.get(figure["verdict"], "")
    return f"{shown} {figure['unit']}{target} {mark}".rstrip()
