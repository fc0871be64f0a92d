"""Reading per-test outcomes out of a job log of `python -m unittest -v` runs (upstream's `openreg`
test config runs OpenReg's own suites through `unittest discover -v`; its outcomes live only in
the log). What unittest's verbose runner prints, in every form it takes:

    test_add (test_ops.TestOps.test_add) ... ok                       (3.11+: module.Class.method)
    test_add (test_ops.TestOps) ... FAIL                              (3.10 and older: module.Class)
    test_sub (test_ops.TestOps.test_sub)                              (a docstring moves the
    Subtracting two tensors ... ERROR                                  status to the next line)
    test_mul (test_ops.TestOps.test_mul) ... printed by the test      (output splits the line:
    ok                                                                 the status comes later)
      test_div (test_ops.TestOps.test_div) (i=1) ... FAIL             (a failing subtest)
    test_pow (test_ops.TestOps.test_pow) ... skipped 'needs two devices'
    ... expected failure | unexpected success | ok (0.012s)           (3.12's --durations)
      test_add_openreg (__main__.TestFooPRIVATEUSE1.test_add_openreg) ... skip: why (0.004s)
                                                        (PyTorch's run_tests: its xmlrunner's form)

then `FAIL: <description>` / `ERROR [0.009s]: <description>` blocks with the traceback (the
message is its last exception line), and `Ran N tests in …s`. Each test gets one of the outcomes producers report (passed, failed,
error, skipped, xfailed, xpassed); a test seen twice (subtests) keeps its worst. GitHub prefixes
every log line with a timestamp and may colour it: both are removed first.

A run whose tests started but that never printed `Ran N tests` (a crash, a timeout, a log cut
short) is incomplete: a test it never reached is not a pass, so the caller gets an error rather
than a report that would read the missing tests as passed."""

import re
from dataclasses import dataclass, field

from relay.inputs.linear import linear
from relay.policy.testids import module_of

from ..callbacks.body import MAX_MESSAGE_BYTES, MAX_STACK_BYTES, FailedTestReport, text_cap
from .junit import FAILING, OUTCOMES, TestReport

WORST_FIRST = ("error", "failed", "xpassed", "passed", "xfailed", "skipped")
MAX_TESTS = 200_000
MAX_STACK_LINES = 200
MAX_LINE_CHARS = 10_000
"""unittest's own lines are short; a test printing a huge tensor is cut before any pattern runs."""

_PREFIX = re.compile(r"^\ufeff?(?:[0-9]{4}-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9](?:\.[0-9]+)?Z )?")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""These two run on every line, and stay on Python's engine for its speed (RE2's `sub` is written
in Python): each has one way to match any text (relay/inputs/linear.py, "one way")."""
_WORD = r"[\pL\pN_]"
"""A letter, digit or underscore of any script, as in a Python name."""
_DESCRIPTION = rf"(?P<name>test{_WORD}*|runTest) \((?P<where>[\pL_][\pL\pN_.]*)\)(?P<params>(?: [\[(].*?[\])])*)"
_HEAD = linear(rf"^(?P<indent>\s*){_DESCRIPTION}(?P<rest>.*)$")
_STATUS = (
    r"(?P<status>ok|FAIL|ERROR|expected failure|unexpected success|skipped(?: (?:'.*'|\".*\"))?|skip: .*?)"
    r"(?: \(\d+(?:\.\d+)?s\))?"
)
_BARE_STATUS = linear(rf"^{_STATUS}$")
_TAIL_STATUS = linear(rf" \.\.\. {_STATUS}$")
_PROBLEM = linear(rf"^(?P<kind>FAIL|ERROR|XPASS|UNEXPECTED SUCCESS)(?: \[[\d.]+s\])?: {_DESCRIPTION}\s*$")
"""Linear time: the bracketed groups of a description can be split many ways (` [a] [b]` is one
group or two), which cost Python's backtracking engine 6 s on a 172-byte line (issue 45)."""
_PROBLEM_KINDS = ("FAIL", "ERROR", "XPASS", "UNEXPECTED SUCCESS")
_REPRO = linear(r"^\s+python (?P<file>\S+\.py) [\pL\pN_]+\.[\pL\pN_]+")
"""PyTorch's "To execute this test, run … python test/test_foo.py TestFooCUDA.test_x": the file."""
_EXCEPTION = linear(r"^[\pL_][\pL\pN_.]*(?:Error|Exception|Exit|Interrupt|Failure|Warning|Timeout)(?::|$)")
_RAN = linear(r"^Ran (?P<count>\d+) tests? in [\d.]+s$")
_RULE_HEAVY = linear(r"^={20,}$")
_RULE_LIGHT = linear(r"^-{20,}$")
_BLOCK_ENDS = ("=", "-", "R")
"""How the lines that end a traceback start (the rules, `Ran N tests`): only those are matched."""
_STATUS_OUTCOME = {
    "ok": "passed",
    "FAIL": "failed",
    "ERROR": "error",
    "expected failure": "xfailed",
    "unexpected success": "xpassed",
}


class IncompleteLog(Exception):
    pass


@dataclass
class ParsedTest:
    name: str
    classname: str
    outcome: str
    """One of OUTCOMES."""
    message: str = ""
    stacktrace: str = ""
    file: str = ""


@dataclass
class LogReport:
    tests: dict[tuple[str, str], ParsedTest] = field(default_factory=dict)
    """(classname, name) → the test's worst outcome, in the order first seen."""
    ran: int = 0
    """The sum of the `Ran N tests` lines."""

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(OUTCOMES, 0)
        for test in self.tests.values():
            counts[test.outcome] += 1
        return counts

    def test_report(self) -> TestReport:
        """Counts per outcome and a row per failed, error or xpassed test, as the JUnit reader
        gives them, so either source compares the same way."""
        report = TestReport()
        for test in self.tests.values():
            one = TestReport(**{test.outcome: 1})
            one.module_add(module_of(test.classname, test.file), test.outcome)
            if test.outcome in FAILING:
                one.failed_tests.append(_failed(test))
            report.merge(one)
        return report


def clean_line(line: str) -> str:
    line = _PREFIX.sub("", line.rstrip("\r\n"))
    return _ANSI.sub("", line) if "\x1b" in line else line


def unittest_log_parse(text: str, source: str = "log") -> LogReport | None:
    """The log's unittest outcomes; None when it holds no unittest verbose output."""
    parser = _Parser()
    for line in text.splitlines():
        parser.feed(clean_line(line[:MAX_LINE_CHARS]))
    if parser.open_run:
        raise IncompleteLog(f"{source}: a unittest run started but never printed its 'Ran N tests' line")
    if not parser.report.tests:
        return None
    return parser.report


class _Parser:
    def __init__(self):
        self.report = LogReport()
        self.pending: tuple[str, str] | None = None
        """The test whose status has not been printed yet (a docstring or output split its line)."""
        self.open_run = False
        self.problem: ParsedTest | None = None
        self.trace: list[str] | None = None
        """The traceback lines of the FAIL/ERROR block being read, if one is."""

    def feed(self, line: str) -> None:
        if self.trace is not None:
            if not (
                line[:1] in _BLOCK_ENDS and (_RULE_HEAVY.match(line) or _RULE_LIGHT.match(line) or _RAN.match(line))
            ):
                if len(self.trace) < MAX_STACK_LINES:
                    self.trace.append(line)
                return
            self._close_problem()
        if line.startswith("Ran ") and (ran := _RAN.match(line)):
            self.report.ran += int(ran["count"])
            self.open_run, self.pending, self.problem = False, None, None
        elif line.startswith(_PROBLEM_KINDS) and (problem := _PROBLEM.match(line)):
            self.pending = None
            self.problem = self.report.tests.get(_key(problem)) if problem["kind"] in ("FAIL", "ERROR") else None
        elif self.problem is not None and _RULE_LIGHT.match(line):
            self.trace = []
        elif _may_head(line) and (head := _HEAD.match(line)):
            self._head(head)
        elif self.pending:
            self._continued(line)

    def _head(self, head) -> None:
        rest = head["rest"]
        if rest and not rest.startswith(" ..."):
            return  # not unittest's description line: it has nothing after it, or " ... "
        key = _key(head)
        status = _PLAIN_TAILS.get(rest) or _tail_status(rest)
        if status:
            self._record(key, status)
            if not head["indent"]:  # a subtest's line leaves its test's own status to come
                self.pending = None
        else:
            self.pending = key  # the status follows a docstring or the test's own output
            self.open_run = self.open_run or bool(rest)

    def _continued(self, line: str) -> None:
        status = _BARE_STATUS.match(line.strip()) or _TAIL_STATUS.search(line)
        if status:
            self._record(self.pending, status["status"])
            self.pending = None

    def _record(self, key: tuple[str, str], status: str) -> None:
        self.open_run = True
        outcome = _STATUS_OUTCOME.get(status, "skipped")
        known = self.report.tests.get(key)
        if known is None:
            if len(self.report.tests) >= MAX_TESTS:  # a test left out would read as passed
                raise IncompleteLog(f"more than {MAX_TESTS:,} tests in one log")
            self.report.tests[key] = ParsedTest(key[1], key[0], outcome)
        elif WORST_FIRST.index(outcome) < WORST_FIRST.index(known.outcome):
            known.outcome = outcome

    def _close_problem(self) -> None:
        lines = [line for line in self.trace if line.strip()]
        if self.problem is not None and lines:
            self.problem.stacktrace = "\n".join(self.trace).strip("\n")
            raised = [line for line in lines if _EXCEPTION.match(line)]
            self.problem.message = (raised or lines)[-1].strip()
            repro = next((m for line in lines if (m := _REPRO.match(line))), None)
            self.problem.file = repro["file"] if repro else ""
        self.problem, self.trace = None, None


_PLAIN_TAILS = {f" ... {status}": status for status in _STATUS_OUTCOME}
"""The common ends of a description line, read without a pattern."""


def _tail_status(rest: str) -> str:
    tail = _TAIL_STATUS.search(rest)
    return tail["status"] if tail and tail.start() == 0 else ""


def _may_head(line: str) -> bool:
    """What every description line holds; the others (most of a log) skip the pattern."""
    return " (" in line and ("test" in line or "runTest" in line)


def _key(match) -> tuple[str, str]:
    """(module.Class, method): 3.11+ prints the method again at the end of the dotted path. A
    test file run as a script says `__main__`, which names no module: it is left out."""
    where, name = match["where"], match["name"]
    classname = where[: -len(name) - 1] if where.endswith(f".{name}") else where
    return classname.removeprefix("__main__."), name


def _failed(test: ParsedTest) -> FailedTestReport:
    message = test.message or ("unexpected success" if test.outcome == "xpassed" else test.outcome.upper())
    message, cut_message = text_cap(message, MAX_MESSAGE_BYTES)
    stack, cut_stack = text_cap(test.stacktrace, MAX_STACK_BYTES)
    return FailedTestReport(
        name=test.name[:1000],
        classname=test.classname[:1000],
        file=test.file[:1000],
        message=message,
        stacktrace=stack,
        truncated=cut_message or cut_stack,
        outcome=test.outcome,
    )
