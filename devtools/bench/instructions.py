"""The callback's cost in instructions: a figure that does not move with the host (issue 55, goal 2).

A CPU time moves with the host: on a machine whose other tenants take a quarter of its cores, the
same callback measured 1.1 ms in one minute and 1.9 in the next (docs/performance.md, "sixth
round"), and a ratio of two such times swings by ±15 % a round. Valgrind's callgrind counts the
instructions a program executes instead: the same code, inputs and environment give the same count
to a few parts in ten thousand, whatever else the machine runs. So the regression guard
(devtools.bench.cost) also runs each revision's probe under callgrind and counts, request by
request, what the callback and the empty view execute (`manage.py bench --only cost`).

Python cannot issue callgrind's client requests (they are a magic instruction sequence), so a
four-function C library does it (MARKS_C, compiled here with the machine's C compiler against
valgrind's own header, loaded by the probe through ctypes). The one package on PyPI that wraps
them, `valgrind` 0.0.0, documents start, stop and dump but no toggle, and ships one wheel (macOS,
CPython 3.8): not a library to depend on. The probe starts with instrumentation off (`--instr-atstart=no`: its imports,
migration and stand-in run at a tenth of the speed instead of a hundredth), turns it on for the
counted round, and collects only inside the requests it counts (`--collect-atstart=no` and a
toggle around each), then dumps: the dump's `totals:` line is the round's instruction count.

Parent-side only; the probe's half (`_Marks`) lives in devtools.bench.cost, which the probe runs."""

import re
import shutil
import subprocess
from pathlib import Path

HEADER = Path("/usr/include/valgrind/callgrind.h")
MARKS_C = """#include <valgrind/callgrind.h>
void crcr_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void crcr_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void crcr_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
int crcr_under_valgrind(void) { return RUNNING_ON_VALGRIND; }
"""
COUNTED_PAIRS = 10
"""Callback pairs (in_progress and completed) counted per revision: a count repeats to a few parts
in ten thousand, so ten pairs say what a hundred would; instrumented Python runs ~50× slower."""
TOTALS_RE = re.compile(rb"^(?:totals|summary):\s*(\d+)", re.MULTILINE)


class Unavailable(Exception):
    """Instructions cannot be counted on this machine (no valgrind, C compiler or callgrind.h)."""


def missing() -> str | None:
    """What this machine lacks for counting, or None when it has it all."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (Debian: apt-get install valgrind)"
    if shutil.which("cc") is None:
        return "no C compiler (cc) to build the callgrind marks"
    if not HEADER.exists():
        return f"{HEADER} is missing (it comes with Debian's valgrind package)"
    return None


def marks_library(base: Path) -> Path:
    """The compiled marks library under `base` (built once; rebuilt when MARKS_C changes)."""
    reason = missing()
    if reason:
        raise Unavailable(reason)
    base.mkdir(parents=True, exist_ok=True)
    source, library = base / "callgrind_marks.c", base / "callgrind_marks.so"
    if not library.exists() or not source.exists() or source.read_text() != MARKS_C:
        source.write_text(MARKS_C)
        built = subprocess.run(
            ["cc", "-O2", "-shared", "-fPIC", "-o", str(library), str(source)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if built.returncode != 0:
            raise Unavailable(f"cc could not build the callgrind marks: {built.stderr.strip()[:500]}")
    return library


def valgrind_argv(out_file: Path) -> list[str]:
    """The prefix that runs a program under callgrind, counting nothing until the program asks."""
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--collect-atstart=no",
        f"--callgrind-out-file={out_file}",
        "--quiet",
    ]


def dump_total(out_file: Path, dump: int) -> int:
    """The instruction count of dump number `dump` (1, 2, …) written to `out_file`."""
    text = Path(f"{out_file}.{dump}").read_bytes()
    found = TOTALS_RE.search(text)
    if found is None:
        raise ValueError(f"{out_file}.{dump} holds no totals line")
    return int(found.group(1))


def summary(callback: int, floor: int, requests: int) -> dict:
    """Per request: the callback's instructions, the empty view's, and their ratio."""
    per_callback, per_floor = callback / requests, floor / requests
    return {
        "requests": requests,
        "callback_instructions": round(per_callback),
        "floor_instructions": round(per_floor),
        "own_instructions": round(per_callback - per_floor),
        "ratio_to_floor": round(per_callback / per_floor, 3) if per_floor else None,
    }


def verdicts(counted: dict[str, dict], this: str, other: str | None, short=lambda rev: rev[:12]) -> list[str]:
    """Each revision's counts, then this one's change against the other: in the callback's own
    instructions and in its ratio to the empty view. `short` spells a revision."""
    lines = [
        f"{label:>8} {short(c['rev']):<13} callback {c['callback_instructions']:,} instructions, empty view "
        f"{c['floor_instructions']:,}, the relay's own {c['own_instructions']:,}: {c['ratio_to_floor']}× "
        f"(callgrind, {c['requests']} requests each)"
        for label, c in counted.items()
    ]
    if other and other in counted and this in counted:
        a, b = counted[this], counted[other]
        lines.append(
            f"instructions, {short(a['rev'])} against {short(b['rev'])}: callback "
            f"{a['callback_instructions'] / b['callback_instructions'] - 1:+.2%}, the relay's own "
            f"{a['own_instructions'] / b['own_instructions'] - 1:+.2%}, ratio to the empty view "
            f"{a['ratio_to_floor'] / b['ratio_to_floor'] - 1:+.2%}"
        )
    return lines


def capabilities(without: int, carrying: int, pairs: int, modules: int) -> dict:
    """Goal 5's A/B in instructions: two counted rounds of `pairs` jobs, the second's completions
    counting `modules` modules (their in_progress callbacks carry none in either), and what the
    counts add to each completion."""
    added = (carrying - without) / pairs
    return {"modules": modules, "completions": pairs, "added_instructions": round(added)}


def capabilities_verdict(carrying: dict, this: dict) -> str:
    """The A/B's line: what the counts add to a completion, and that against a whole callback's
    count (the same host-free unit; goal 5's 2 ms stays judged in time, by the timed A/B)."""
    share = carrying["added_instructions"] / this["callback_instructions"]
    return (
        f"capabilities (goal 5), counted: a completion counting {carrying['modules']:,} modules adds "
        f"{carrying['added_instructions']:,} instructions, {share:.2f}× an average callback's "
        f"{this['callback_instructions']:,} ({carrying['completions']} completions each way)"
    )
