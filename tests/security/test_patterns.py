"""No user-supplied pattern runs unbounded: the grid's regex filter matches in linear time, and a
pattern it will not run is shown as an error on the page, never a 500 or a stalled worker."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hud.patterns import MAX_PATTERN_CHARS, PatternError, pattern_matcher

ROOT = Path(__file__).resolve().parents[2]
CATASTROPHIC = [
    "(.|.|.)*@",
    "(a+)+$",
    "(a|aa)+$",
    "(a|a?)+$",
    "(.*a){20}$",
    "^(\\w+\\s?)*$",
    "(x+x+)+y",
    "([a-z]+)*[0-9]",
]


def test_catastrophic_patterns_run_in_linear_time_through_the_grid_filter():
    """In a child process, so a backtracking engine that hangs is killed, not the suite."""
    script = textwrap.dedent(f"""
        import os, time, django
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crcr.settings")
        django.setup()
        from hud.selectors_grid import GridFilters, name_matcher
        started = time.monotonic()
        for pattern in {CATASTROPHIC!r}:
            matcher = name_matcher(GridFilters(name=pattern, regex=True))
            for text in ("a" * 5000 + "!", "x" * 5000, "intel/torch-xpu-ops " * 250):
                matcher(text)
        print(round(time.monotonic() - started, 3))
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert float(result.stdout.split()[-1]) < 2.0


def test_an_ordinary_pattern_still_matches_case_insensitively():
    matcher = pattern_matcher(r"xpu|^amd/")
    assert matcher("intel/torch-XPU-ops") and matcher("AMD/rocm") and not matcher("apple/mps")


@pytest.mark.parametrize(
    "pattern", ["(a", "(a)\\1", "(?=a)b", "a{1001}", "((a{100}){100}){100}", "x" * (MAX_PATTERN_CHARS + 1)]
)
def test_a_pattern_the_engine_will_not_run_is_a_pattern_error(pattern):
    with pytest.raises(PatternError):
        pattern_matcher(pattern)


@pytest.mark.django_db
@pytest.mark.parametrize("pattern", ["(.|.|.)*@", "(a)\\1", "(?<=x)y", "[z-a]"])
def test_the_grid_answers_a_hostile_or_invalid_pattern_with_a_visible_error_or_a_result(client, pattern):
    from tests.factories import ProjectFactory

    ProjectFactory(full_name="intel/torch-xpu-ops-and-a-long-name", level="L2")
    response = client.get("/", {"regex": "1", "name": pattern})
    assert response.status_code == 200
    if pattern != "(.|.|.)*@":
        assert "Invalid regular expression" in response.content.decode()
