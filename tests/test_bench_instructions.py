"""devtools.bench.instructions: the guard's instruction counts under callgrind. The pure pieces
(a dump's total, the summary, the verdict) on their own; the marks and a probe's counted round
under a real valgrind, on a few lines of Python, where the machine has valgrind (every machine
here has; `make bench` runs the Django probe itself)."""

import subprocess
import sys

import pytest

from devtools.bench import cost, instructions

DUMP_HEAD = b"""# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 6479
cmd:  /work/main/.venv/bin/python /work/main/devtools/bench/cost.py
part: 1

desc: I1 cache:
desc: Trigger: Client Request: callback

positions: line
events: Ir
summary: 113035183

"""

needs_valgrind = pytest.mark.skipif(instructions.missing() is not None, reason=str(instructions.missing()))


def test_a_dumps_total_is_its_summary_line(tmp_path):
    (tmp_path / "callgrind.out.2").write_bytes(DUMP_HEAD + b"fn=(1) main\n16 3\n")
    assert instructions.dump_total(tmp_path / "callgrind.out", 2) == 113_035_183


def test_a_dump_without_a_total_is_an_error_not_a_zero(tmp_path):
    (tmp_path / "callgrind.out.1").write_bytes(b"# callgrind format\nevents: Ir\n")
    with pytest.raises(ValueError, match="no totals line"):
        instructions.dump_total(tmp_path / "callgrind.out", 1)


def test_the_summary_is_per_request_with_the_relays_own_share_and_the_ratio():
    summary = instructions.summary(callback=5_000_000, floor=1_000_000, requests=4)
    assert summary == {
        "requests": 4,
        "callback_instructions": 1_250_000,
        "floor_instructions": 250_000,
        "own_instructions": 1_000_000,
        "ratio_to_floor": 5.0,
    }


def test_the_verdict_gives_each_revisions_counts_and_this_ones_change():
    this = {"rev": "b" * 40, **instructions.summary(4_500_000, 1_000_000, 4)}
    against = {"rev": "a" * 40, **instructions.summary(5_000_000, 1_000_000, 4)}
    lines = instructions.verdicts({"this": this, "against": against}, "this", "against")
    assert "callback 1,125,000 instructions, empty view 250,000, the relay's own 875,000: 4.5×" in lines[0]
    assert lines[2] == (
        f"instructions, {'b' * 12} against {'a' * 12}: callback -10.00%, the relay's own -12.50%, "
        "ratio to the empty view -10.00%"
    )
    assert len(instructions.verdicts({"this": this}, "this", None)) == 1


def test_the_capabilities_ab_gives_what_the_module_counts_add_to_each_completion():
    carrying = instructions.capabilities(without=40_000_000, carrying=46_000_000, pairs=10, modules=1100)
    assert carrying == {"modules": 1100, "completions": 10, "added_instructions": 600_000}
    this = {"rev": "b" * 40, **instructions.summary(4_000_000 * 20, 700_000 * 20, 20)}
    assert instructions.capabilities_verdict(carrying, this) == (
        "capabilities (goal 5), counted: a completion counting 1,100 modules adds 600,000 instructions, "
        "0.15× an average callback's 4,000,000 (10 completions each way)"
    )


def test_what_the_machine_lacks_is_named(monkeypatch):
    monkeypatch.setattr(instructions.shutil, "which", lambda name: None if name == "valgrind" else "/usr/bin/" + name)
    assert "valgrind is not installed" in instructions.missing()
    with pytest.raises(instructions.Unavailable, match="valgrind"):
        instructions.marks_library(cost.ROOT / "var" / "never-built")


def test_without_valgrind_the_guard_says_the_counts_were_skipped(monkeypatch, tmp_path):
    monkeypatch.setattr(instructions, "missing", lambda: "valgrind is not installed")
    said = []
    assert cost.instruction_counts({}, 5, tmp_path, said.append) == {"skipped": "valgrind is not installed"}
    assert said == ["instructions: not counted: valgrind is not installed"]


WORK = """
import sys
sys.path.insert(0, {root!r})
from devtools.bench.cost import _Marks

def work(n):
    total = 0
    for i in range(n):
        total += i * i
    return total

marks = _Marks({library!r})
for n in (1000, 2000, 1000):
    marks.counting("work")
    marks.toggle("work"); work(n); marks.toggle("work")
    marks.toggle("other"); work(20000); marks.toggle("other")  # another side's: not counted
    print(marks.dump("work"), flush=True)
"""


@needs_valgrind
def test_the_marks_count_only_the_counted_sides_work_and_repeat_it(tmp_path):
    library = instructions.marks_library(tmp_path)
    script = tmp_path / "work.py"
    script.write_text(WORK.format(root=str(cost.ROOT), library=str(library)))
    out = tmp_path / "callgrind.out"
    done = subprocess.run(
        [*instructions.valgrind_argv(out), sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "2", "3"]
    once, twice, again = (instructions.dump_total(out, n) for n in (1, 2, 3))
    assert 1.8 < twice / once < 2.2  # twice the loop, twice the count: the 20,000-step loop is not in it
    assert abs(again - once) / once < 0.01  # the same work, the same count


PROBE = """
import json, os, sys
sys.path.insert(0, {root!r})
from devtools.bench.cost import MARKS_ENV, _Marks
marks = _Marks(os.environ[MARKS_ENV])
fixed = {{name: os.environ.get(name) for name in ("PYTHONHASHSEED", "CRCR_REGISTRY_CACHE_SECONDS")}}
print(json.dumps({{"ready": True, **fixed}}), flush=True)
for line in sys.stdin:
    question = json.loads(line)
    marks.counting(question["count"])
    steps = 3000 * question["pairs"] * (1 + question.get("modules", 0))
    marks.toggle("floor"); sum(i * i for i in range(steps)); marks.toggle("floor")
    print(json.dumps({{"errors": 0, "dumps": marks.dump(question["count"])}}), flush=True)
"""


@needs_valgrind
def test_a_probe_with_marks_runs_under_callgrind_and_counts_its_round(tmp_path):
    library = instructions.marks_library(tmp_path / "marks")
    script = tmp_path / "probe.py"
    script.write_text(PROBE.format(root=str(cost.ROOT)))
    probe = cost.Probe("this", tmp_path, tmp_path / "store", script=script, marks=library)
    try:
        # a set's order and the project lookup's memory would make the count move
        assert probe.wait_ready() == {"ready": True, "PYTHONHASHSEED": "0", "CRCR_REGISTRY_CACHE_SECONDS": "0"}
        assert probe.count(1, "callback") < 1000  # nothing of the callback's side ran
        floor = probe.count(2, "floor")
        assert floor > 100_000
        assert 1.8 < probe.count(2, "floor", modules=1) / floor < 2.2  # the modules reach the round
    finally:
        probe.close()
    assert probe.proc.returncode == 0
