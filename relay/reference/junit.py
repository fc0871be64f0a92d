"""Reading JUnit XML test reports (the upstream reference's artifacts) into counts of every
outcome and the failing tests, with the same caps as callbacks. defusedxml refuses entity tricks in files we fetch."""

from dataclasses import dataclass, field

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from relay.policy.testids import module_of

from ..callbacks.body import (
    MAX_FAILED_TESTS,
    MAX_MESSAGE_BYTES,
    MAX_MODULES,
    MAX_STACK_BYTES,
    FailedTestReport,
    text_cap,
)


class MalformedReport(Exception):
    pass


OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
FAILING = ("failed", "error", "xpassed")
"""The outcomes a failed-test row is kept for: each makes a pytest or unittest run red."""
_XPASS_MESSAGES = ("Failed: Unexpected success", "[XPASS(strict)]", "xfail-marked test passes unexpectedly")
_XFAIL_TYPES = ("pytest.xfail", "XFAIL")
_COLLECTION_FAILURE = "collection failure"


@dataclass
class TestReport:
    __test__ = False  # not a pytest test class

    passed: int = 0
    failed: int = 0
    skipped: int = 0
    error: int = 0
    xfailed: int = 0
    xpassed: int = 0
    accelerator_ran: int = 0
    """Tests run (not skipped) classified ACCELERATOR (hw_classification)."""
    failed_tests: list[FailedTestReport] = field(default_factory=list)
    truncated: bool = False
    modules: dict[str, dict[str, int]] = field(default_factory=dict)
    """Counts per upstream test module (relay.policy.testids.module_of), as a callback's
    `workflow.module_counts` carries them; past MAX_MODULES, under the unknown module ""."""

    def module_add(self, module: str, outcome: str, count: int = 1) -> None:
        if module not in self.modules and len(self.modules) >= MAX_MODULES:
            module = ""
        counts = self.modules.setdefault(module, {})
        counts[outcome] = counts.get(outcome, 0) + count

    @property
    def total(self) -> int:
        return sum(getattr(self, outcome) for outcome in OUTCOMES)

    def merge(self, other: "TestReport") -> None:
        for outcome in (*OUTCOMES, "accelerator_ran"):
            setattr(self, outcome, getattr(self, outcome) + getattr(other, outcome))
        room = MAX_FAILED_TESTS - len(self.failed_tests)
        self.failed_tests += other.failed_tests[:room]
        self.truncated = self.truncated or other.truncated or len(other.failed_tests) > room
        for module, counts in other.modules.items():
            for outcome, count in counts.items():
                self.module_add(module, outcome, count)


def junit_parse(data: bytes, source: str = "report") -> TestReport:
    try:
        root = ElementTree.fromstring(data)
    except (ElementTree.ParseError, DefusedXmlException, ValueError) as exc:
        raise MalformedReport(f"{source}: not valid JUnit XML ({exc})") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise MalformedReport(f"{source}: root element is <{root.tag}>, not <testsuites> or <testsuite>")
    report = TestReport()
    for case in root.iter("testcase"):
        _count(report, case)
    return report


def case_outcome(case) -> tuple[str, object]:
    """(outcome, the element that says so) as each producer writes it: `<error>` (unittest-xml
    and pytest's setup/teardown/collection errors) is an error, unless unittest-xml-reporting
    marks an unexpected success with it; `<failure>` a failure, unless pytest says the test
    passed unexpectedly; `<skipped>` a skip, or an expected failure (pytest.xfail, XFAIL)."""
    problem = next((child for child in case if child.tag in ("failure", "error")), None)
    if problem is not None:
        kind, message = problem.get("type") or "", problem.get("message") or ""
        if kind == "UnexpectedSuccess" or message.startswith(_XPASS_MESSAGES):
            return "xpassed", problem
        return ("error" if problem.tag == "error" else "failed"), problem
    skip = next((child for child in case if child.tag == "skipped"), None)
    if skip is None:
        return "passed", None
    if (skip.get("message") or "").startswith(_XPASS_MESSAGES):
        return "xpassed", skip
    return ("xfailed" if skip.get("type") in _XFAIL_TYPES else "skipped"), skip


def broke_before_tests(case, outcome: str, problem) -> bool:
    """pytest's stand-in for a module it could not import: no test of it ran."""
    return outcome == "error" and not case.get("classname") and (problem.get("message") or "") == _COLLECTION_FAILURE


def _count(report: TestReport, case) -> None:
    outcome, problem = case_outcome(case)
    setattr(report, outcome, getattr(report, outcome) + 1)
    report.module_add(module_of(case.get("classname") or "", case.get("file") or ""), outcome)
    report.accelerator_ran += outcome != "skipped" and _classification(case) == "ACCELERATOR"
    if outcome not in FAILING or broke_before_tests(case, outcome, problem):
        return
    if len(report.failed_tests) < MAX_FAILED_TESTS:
        report.failed_tests.append(_failed(case, problem, outcome))
    else:
        report.truncated = True


def _failed(case, problem, outcome: str) -> FailedTestReport:
    message, cut_message = text_cap(problem.get("message") or "", MAX_MESSAGE_BYTES)
    stack, cut_stack = text_cap(problem.text or "", MAX_STACK_BYTES)
    classname = case.get("classname") or ""
    return FailedTestReport(
        name=(case.get("name") or "")[:1000],
        classname=classname[:1000],
        file=(case.get("file") or "")[:1000],
        message=message,
        stacktrace=stack,
        truncated=cut_message or cut_stack,
        hw_classification=_classification(case)[:32],
        outcome=outcome,
    )


def _classification(case) -> str:
    return (case.get("hw_classification") or _property(case, "hw_classification")).upper()


def _property(case, name: str) -> str:
    for prop in case.iter("property"):
        if prop.get("name") == name:
            return prop.get("value") or ""
    return ""
