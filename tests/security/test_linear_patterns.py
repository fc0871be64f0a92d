"""No pattern run on text from outside can backtrack (issue 45, item 3): every regular expression
of the product runs on RE2 (relay.inputs.linear), or is one of the few below that stay on Python's engine
for speed, each with the reason it has only one way to match any text. And every parser of outside
text is fed adversarial lines of growing length, in a child process, with the time per length
printed: a backtracking pattern would not finish (a 190-byte line of bracketed groups took the
unittest-log reader 25 s); the bound itself is structural, not a timed assertion."""

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("relay", "hud", "api", "crcr")

SINGLE_CLASS = "one character class, repeated: a run is matched once, from its first character"
FIXED = "fixed-width or bounded classes with separators outside them: at most one way per position"
ANCHORED_FORMAT = "anchored, every repeat followed by a character outside its class: no choice to undo"
ALTERNATIVES = "alternatives of literal words (no repeat): at most (words × length) steps"

AUDITED = {
    # path, the pattern's source: why Python's engine cannot backtrack on it
    ("relay/registry/allowlist.py", "f'{_OWNER}/[A-Za-z0-9._-]{{1,100}}'"): FIXED,
    ("relay/registry/allowlist.py", "_OWNER"): FIXED,
    ("relay/registry/allowlist.py", "'[A-Za-z0-9][A-Za-z0-9._-]{0,37}'"): FIXED,
    ("relay/registry/allowlist.py", "'[A-Za-z0-9][A-Za-z0-9._/, -]*'"): FIXED + " (fullmatch only)",
    ("relay/callbacks/receive.py", "'^[0-9a-f]{40}$'"): FIXED,
    ("relay/callbacks/triage_verdict.py", "'[0-9a-fA-F]{7,40}'"): FIXED + " (fullmatch only)",
    ("relay/callbacks/triage_verdict.py", "'[\\\\s\\\\x00-\\\\x1f\\\\x7f]'"): SINGLE_CLASS,
    ("relay/reference/unittest_log.py", None): ANCHORED_FORMAT + " (the timestamp prefix, the ANSI colour codes)",
    ("relay/github/markdown.py", "f'[{CONTROLS}]+'"): SINGLE_CLASS,
    ("relay/github/markdown.py", "f'[\\\\r{CONTROLS_BUT_LAYOUT}]+'"): SINGLE_CLASS,
    ("relay/github/markdown.py", "'`+'"): SINGLE_CLASS,
    ("relay/intake/deliveries.py", "'refs/tags/ciflow/trunk/([1-9][0-9]{0,8})'"): FIXED,
    ("relay/intake/payload_shape.py", "'[0-9a-f]{40}'"): FIXED,
    ("relay/management/commands/allowlist_import.py", None): ANCHORED_FORMAT + " (an operator's command-line URL)",
    ("relay/inputs/params.py", "f'[0-9]{{1,{MAX_DIGITS}}}'"): FIXED,
    ("relay/registry/providers.py", None): FIXED,
    ("relay/teststore/rematch.py", None): ALTERNATIVES,
    ("relay/policy/testids.py", None): ALTERNATIVES + "; tokens are fullmatched, ≤ 31 characters",
    ("relay/inputs/text.py", "f'[{CONTROLS}]+'"): SINGLE_CLASS,
    ("relay/inputs/text.py", "f'[{CONTROLS}]'"): SINGLE_CLASS,
    ("relay/triage/matching.py", "'^[\\\\w.\\\\-\\\\[\\\\]*?/ ,:()=+!#@]+$'"): SINGLE_CLASS,
    ("hud/middleware.py", "f'[{CONTROLS_BUT_LAYOUT}]'"): SINGLE_CLASS,
    ("hud/selectors_backend.py", "'([0-9]+)'"): SINGLE_CLASS,
    ("hud/selectors_grid.py", "'[0-9a-fA-F]{7,40}'"): FIXED,
    ("hud/templatetags/hud_tags.py", "'[0-9a-fA-F]{7,40}'"): FIXED,
    ("api/views_hud.py", "'[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}'"): FIXED,
    ("api/views_hud.py", "'[0-9a-fA-F]{7,40}'"): FIXED,
    ("api/views_bisections.py", "'[0-9a-fA-F]{7,40}'"): FIXED,
    # Buildkite's shortcodes in a job's name: a run of one class between colons it excludes (the
    # one-character lookarounds are fixed-width), so a run is tried once from its opening colon.
    ("relay/policy/verdicts.py", "'(?<![\\\\w:]):[a-z0-9_+\\\\-]+:(?![\\\\w:])'"): ANCHORED_FORMAT,
    ("relay/policy/verdicts.py", "'[\U0001f000-\\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f]'"): SINGLE_CLASS
    + " (no repeat)",
}
"""(path, pattern source): a None pattern audits every pattern of that file."""


def python_patterns() -> set[tuple[str, str]]:
    """Every `re.<function>(pattern, …)` call of the product, as (path, the pattern's source)."""
    found = set()
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                func = node.func if isinstance(node, ast.Call) else None
                if isinstance(func, ast.Attribute) and getattr(func.value, "id", None) == "re" and node.args:
                    found.add((str(path.relative_to(ROOT)), ast.unparse(node.args[0])))
    return found


def test_every_pattern_on_pythons_engine_is_audited_as_one_way_and_the_rest_run_on_re2():
    unaudited = {(p, s) for p, s in python_patterns() if (p, s) not in AUDITED and (p, None) not in AUDITED}
    assert unaudited == set(), "run these through relay.inputs.linear.linear (RE2), or audit them here"


def test_no_product_module_imports_another_regex_engine_under_another_name():
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            text = path.read_text()
            assert "import re as" not in text and "from re import" not in text, path
            assert "import regex" not in text, path


def test_the_parsers_patterns_are_re2():
    from hud import selectors_backend, selectors_search
    from relay.inputs.linear import is_linear
    from relay.reference import reports as reference_reports
    from relay.reference import unittest_log
    from relay.results import heads
    from relay.triage.matching import _compiled

    patterns = [getattr(unittest_log, n) for n in ("_HEAD", "_PROBLEM", "_TAIL_STATUS", "_BARE_STATUS", "_RAN")]
    patterns += [unittest_log._REPRO, unittest_log._EXCEPTION, reference_reports._SHARD, _compiled("a*b?[!c]")]
    patterns += [selectors_backend._PARENS, selectors_backend._SUFFIX, heads._PR_IN_TITLE]
    patterns += [selectors_search.PR_NUMBER, selectors_search.SHA_PREFIX]
    assert all(is_linear(p) for p in patterns)


LENGTHS = [250, 1_000, 4_000, 9_000]
ADVERSARIAL = {
    # what is fed, to which parser: each a line built to make a backtracking engine try every split
    "unittest: FAIL with bracketed groups": "unittest:FAIL: test_x (a.B){' [a]' * (n // 4)}x",
    "unittest: description with groups": "unittest:test_x (a.B){' (a)' * (n // 4)} ..",
    "unittest: status after many dots": "unittest:test_x (a.B) ... skipped '{' ... skipped ' * (n // 14)}",
    "unittest: exception-looking line": "unittest_trace:{'a' * n}Erro",
    "unittest: repro-looking line": "unittest_trace:    python {'a.py' * (n // 4)} x",
    "junit: a long test name": "junit:{'test_[' * (n // 6)}",
    "reference shard name": "shard:{'a' * n} (x",
    "HUD shard name": "hud_shard:{'a (' * (n // 3)}",
    "commit title PR number": "title:{'(#1)' + ' ' * n}x",
    "search query": "search:pr{' ' * n}#{' ' * n}x",
    "known-issue glob": "glob:{'a' * n}",
    "test id of a long name": "testid:{'test' + '_cuda' * (n // 5)}",
}


def test_every_parser_reads_adversarial_lines_of_growing_length_in_linear_time():
    """In a child process, so a backtracking engine that hangs is killed, not the suite; the
    times it prints are a measurement (read them with -s), never an assertion."""
    script = textwrap.dedent(f"""
        import os, time, django
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crcr.settings")
        django.setup()
        from hud.selectors_backend import shard_of
        from hud.selectors_search import PR_NUMBER
        from relay.results.heads import _PR_IN_TITLE
        from relay.reference import unittest_log
        from relay.reference.junit import MalformedReport, junit_parse
        from relay.reference.reports import _SHARD
        from relay.policy.testids import report_ids
        from relay.triage.matching import glob_matches

        def unittest(line):
            try:
                unittest_log.unittest_log_parse(line + "\\n" + line + "\\nRan 1 test in 0.1s")
            except unittest_log.IncompleteLog:
                pass

        def unittest_trace(line):
            parser = unittest_log._Parser()
            parser.problem, parser.trace = unittest_log.ParsedTest("t", "c", "failed"), [line] * 3
            parser._close_problem()

        def junit(name):
            xml = f'<testsuite><testcase classname="c" name="{{name}}"><failure message="m"/></testcase></testsuite>'
            try:
                junit_parse(xml.encode())
            except MalformedReport:
                pass

        parsers = {{
            "unittest": unittest,
            "unittest_trace": unittest_trace,
            "junit": junit,
            "shard": _SHARD.search,
            "hud_shard": shard_of,
            "title": _PR_IN_TITLE.search,
            "search": PR_NUMBER.match,
            "glob": lambda text: glob_matches("*a*a*a*a*a*a*a*a*b", text),
            "testid": lambda name: report_ids([{{"name": name, "classname": "TestFooCUDA"}}], "cuda", {{}}),
        }}
        for label, spec in {ADVERSARIAL!r}.items():
            parser, template = spec.split(":", 1)
            times = []
            for n in {LENGTHS!r}:
                line = eval("f" + repr(template), {{"n": n}})
                started = time.perf_counter()
                parsers[parser](line)
                times.append(time.perf_counter() - started)
            print(label, " ".join(f"{{n}}:{{t * 1000:.2f}}ms" for n, t in zip({LENGTHS!r}, times)))
    """)
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    print(result.stdout)
    assert len(result.stdout.splitlines()) == len(ADVERSARIAL)


@pytest.mark.parametrize("pattern", ["(a", "(?=a)b", "(a)\\1"])
def test_a_pattern_re2_will_not_run_is_a_pattern_error(pattern):
    from relay.inputs.linear import PatternError, linear

    with pytest.raises(PatternError):
        linear(pattern)


def test_text_with_a_lone_surrogate_is_matched_not_an_error():
    """Python's engine takes any str; RE2 reads UTF-8, which a lone surrogate is not."""
    from relay.inputs.linear import linear

    pattern = linear(r"(?P<word>b+)")
    assert pattern.search("a\ud800bb")["word"] == "bb" and pattern.search("a\ud800bb").span() == (2, 4)
    assert pattern.sub("-", "\udfffbb\ud800") == "\udfff-\ud800"
    assert pattern.split("x\ud800bx") == ["x\ud800", "b", "x"]
