"""Reading JUnit XML test reports (the upstream reference's artifacts) into counts and failed
tests, with the same caps as callbacks. defusedxml refuses entity tricks in files we fetch."""

from dataclasses import dataclass, field

from defusedxml import ElementTree
from defusedxml.common import DefusedXmlException

from .body import MAX_FAILED_TESTS, MAX_MESSAGE_BYTES, MAX_STACK_BYTES, FailedTestReport, text_cap


class MalformedReport(Exception):
    pass


@dataclass
class TestReport:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    failed_tests: list[FailedTestReport] = field(default_factory=list)
    truncated: bool = False

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.skipped

    def merge(self, other: "TestReport") -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        room = MAX_FAILED_TESTS - len(self.failed_tests)
        self.failed_tests += other.failed_tests[:room]
        self.truncated = self.truncated or other.truncated or len(other.failed_tests) > room


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


def _count(report: TestReport, case) -> None:
    problem = next((child for child in case if child.tag in ("failure", "error")), None)
    if problem is not None:
        report.failed += 1
        if len(report.failed_tests) < MAX_FAILED_TESTS:
            report.failed_tests.append(_failed(case, problem))
        else:
            report.truncated = True
    elif any(child.tag == "skipped" for child in case):
        report.skipped += 1
    else:
        report.passed += 1


def _failed(case, problem) -> FailedTestReport:
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
        hw_classification=(case.get("hw_classification") or _property(case, "hw_classification")).upper()[:32],
    )


def _property(case, name: str) -> str:
    for prop in case.iter("property"):
        if prop.get("name") == name:
            return prop.get("value") or ""
    return ""
