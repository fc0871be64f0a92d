#!/usr/bin/env python3
"""Report a downstream CI job to the PyTorch Cross-Repository CI Relay (CRCR).

    python3 crcr_report.py in-progress
    python3 crcr_report.py completed --conclusion failure --junit 'reports/*.xml' \\
        --artifact-url https://example.org/logs/123 --env device=xpu

One file, Python >= 3.8 standard library only, so a downstream job can fetch it and run it with
no install step. It sends the request the cross-repo-ci-relay-callback action sends (the echoed
dispatch plus a `workflow` object), adds failed tests read from JUnit XML and a free-form
environment, and retries only when the relay says a retry is safe.
"""

import argparse
import glob
import http.client
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

VERSION = "1.0"
USER_AGENT = f"crcr-report/{VERSION}"
NO_URL = (
    "no relay callback URL: set CRCR_CALLBACK_URL (or pass --url) to the relay your backend is "
    "registered with, e.g. https://<relay host>/github/callback. There is no default, so that this "
    "job's OIDC token only ever goes to a relay you chose"
)
"""The existing action's default, so moving from the action to this client changes nothing."""
DEFAULT_AUDIENCE = "pytorch-cross-repo-ci-relay"
UPSTREAM_REPO = "pytorch/pytorch"
SELF_REPORT_EVENTS = ("nightly", "periodic")
CONCLUSIONS = ("success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required", "stale")
CONCLUSION_ALIASES = {"failed": "failure", "canceled": "cancelled", "passed": "success", "timed-out": "timed_out"}
"""What GitLab's CI_JOB_STATUS says and people type, mapped onto GitHub's check-run conclusions."""

# The relay's limits (relay/callback_body.py). Staying inside them means the relay stores exactly
# what we send, and a huge test report never costs the whole callback a 413.
MAX_FAILED_TESTS = 1000
MAX_MESSAGE_BYTES = 1024
MAX_STACK_BYTES = 4096
MAX_NAME_CHARS = 1000
MAX_BODY_BYTES = 2 * 1024 * 1024
MAX_ENV_KEYS = 50
MAX_ENV_KEY_CHARS = 64
MAX_VERDICT_BYTES = 16 * 1024
MAX_MODULES = 2000
MAX_MODULE_CHARS = 300
"""The callback action's cap on a triage verdict; the relay drops a larger one."""
TRUNCATION_MARK = "\u2026 [truncated]"
SHRINK_STEPS = ((MAX_STACK_BYTES, MAX_MESSAGE_BYTES), (1024, 1024), (256, 256), (0, 128))
"""(stack trace, message) byte caps tried in turn when failed tests push the body over 2 MB."""

DEFAULT_MAX_TIME = 60.0
DEFAULT_REQUEST_TIMEOUT = 10.0
MIN_RETRY_WAIT = 0.5
"""Even `Retry-After: 0` waits a little, so a struggling relay is not hammered in a tight loop."""
MAX_BACKOFF = 8.0

EXIT_OK, EXIT_UNEXPECTED, EXIT_USAGE, EXIT_BAD_INPUT, EXIT_TOKEN, EXIT_REJECTED, EXIT_UNAVAILABLE = range(7)

HELP_EPILOG = """\
where the dispatch (the relay's client_payload) comes from, first found:
  --payload FILE          a file holding the client_payload, or a whole repository_dispatch event
  CRCR_CLIENT_PAYLOAD     the client_payload as JSON text, or the path of a file holding it
                          (Buildkite: handed on by whatever triggers the build from the dispatch;
                          GitLab: a trigger variable, plain or of type "file")
  GITHUB_EVENT_PATH       GitHub Actions: the repository_dispatch event's client_payload
  Self-reports (--event-type nightly|periodic --delivery-id SHA) need none of these.

where the OIDC token comes from, first found (it is never printed):
  --token-env NAME        the token in environment variable NAME
  CRCR_OIDC_TOKEN         the token itself (GitLab `id_tokens`, or any CI that can mint one)
                          A provided token serves one call: the relay takes each token once, so
                          in-progress and completed need a token each.
  GitHub Actions          minted afresh for every try from ACTIONS_ID_TOKEN_REQUEST_URL and
                          ACTIONS_ID_TOKEN_REQUEST_TOKEN; the job needs `permissions: id-token: write`
  Buildkite               minted afresh for every try with `buildkite-agent oidc request-token`

the run being reported is read from GitHub Actions (GITHUB_*), Buildkite (BUILDKITE_*) or
GitLab CI (CI_*) variables; --workflow-name, --run-id, --run-attempt, --job-name and
--check-run-id override them. CRCR_CALLBACK_URL and CRCR_OIDC_AUDIENCE set --url and --audience.

exit codes:
  0  accepted; or answered "ignored" (repository not registered, or at L1) or "duplicate"
     (this very report was already recorded)
  1  unexpected error: a bug in this script, please report it
  2  usage: a missing or invalid option; nothing was sent
  3  bad input: malformed JUnit XML, or a missing or malformed dispatch payload; nothing was sent
  4  no OIDC token: none was provided, or the token endpoint refused or kept failing
  5  rejected by the relay (HTTP 3xx/4xx other than 429): its reason is printed; do not retry
  6  relay unavailable: no connection, timeouts, HTTP 429 or 5xx, and --max-time ran out
     (HTTP 429/503 with Retry-After and connection problems are retried until then)
"""


# --- errors and messages ------------------------------------------------------------------------


class ReportError(Exception):
    exit_code = EXIT_UNEXPECTED


class UsageError(ReportError):
    exit_code = EXIT_USAGE


class BadInput(ReportError):
    exit_code = EXIT_BAD_INPUT


class TokenError(ReportError):
    exit_code = EXIT_TOKEN


class Rejected(ReportError):
    exit_code = EXIT_REJECTED


class Unavailable(ReportError):
    exit_code = EXIT_UNAVAILABLE


class TransientProblem(Exception):
    """A try that may work if repeated: no answer, a timeout, or a token endpoint hiccup."""

    def __init__(self, message: str, during_token: bool = False):
        super().__init__(message)
        self.during_token = during_token


def log(level: str, message: str) -> None:
    """To stderr; on GitHub Actions as a workflow command, so problems show up as annotations."""
    if os.environ.get("GITHUB_ACTIONS") == "true" and level in ("error", "warning"):
        escaped = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
        print(f"::{level}::crcr_report: {escaped}", file=sys.stderr)
    else:
        prefix = "" if level == "info" else f"{level}: "
        print(f"crcr_report: {prefix}{message}", file=sys.stderr)


# --- JUnit XML ----------------------------------------------------------------------------------


def cut(text: str, limit: int) -> str:
    """`text` in at most `limit` UTF-8 bytes, ending in a visible mark when shortened: the relay's
    own rule, so the relay never has to cut again."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    mark = TRUNCATION_MARK.encode("utf-8")
    if limit <= len(mark):
        return data[:limit].decode("utf-8", errors="ignore")
    return data[: limit - len(mark)].decode("utf-8", errors="ignore") + TRUNCATION_MARK


@dataclass
class FailedTest:
    name: str
    classname: str = ""
    file: str = ""
    message: str = ""
    stacktrace: str = ""
    hw_classification: str = ""
    outcome: str = "failed"
    """failed, error or xpassed: what made this test red."""

    def as_json(self, message_cap: int = MAX_MESSAGE_BYTES, stack_cap: int = MAX_STACK_BYTES) -> dict:
        return {
            "name": self.name,
            "classname": self.classname,
            "file": self.file,
            "message": cut(self.message, message_cap),
            "stacktrace": cut(self.stacktrace, stack_cap),
            "hw_classification": self.hw_classification,
            "outcome": self.outcome,
        }


OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
FAILING_OUTCOMES = ("failed", "error", "xpassed")
XPASS_MESSAGES = ("Failed: Unexpected success", "[XPASS(strict)]", "xfail-marked test passes unexpectedly")
XFAIL_TYPES = ("pytest.xfail", "XFAIL")


def testcase_outcome(case: ET.Element) -> tuple[str, ET.Element | None]:
    """As pytest and unittest-xml-reporting write them: <error> is an error (unittest-xml-reporting
    also marks an unexpected success with it), <failure> a failure unless pytest says the test
    passed unexpectedly, <skipped> a skip or an expected failure (pytest.xfail, XFAIL)."""
    problem = _first_child(case, ("failure", "error"))
    if problem is not None:
        if problem.get("type") == "UnexpectedSuccess" or (problem.get("message") or "").startswith(XPASS_MESSAGES):
            return "xpassed", problem
        return ("error" if _tag(problem) == "error" else "failed"), problem
    skip = _first_child(case, ("skipped",))
    if skip is None:
        return "passed", None
    if (skip.get("message") or "").startswith(XPASS_MESSAGES):
        return "xpassed", skip
    return ("xfailed" if skip.get("type") in XFAIL_TYPES else "skipped"), skip


@dataclass
class JUnitSummary:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    error: int = 0
    xfailed: int = 0
    xpassed: int = 0
    accelerator_ran: int = 0
    """Tests run (not skipped) whose report classifies them ACCELERATOR (hw_classification): the
    in-scope suite the relay judges coverage by."""
    failures: list[FailedTest] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    modules: dict = field(default_factory=dict)
    """Counts per test module as reported (module_key); the relay names each by its identity
    rule. Past MAX_MODULES, counted under "" (no module)."""

    def counts(self) -> dict[str, int]:
        counts = {outcome: getattr(self, outcome) for outcome in OUTCOMES}
        counts = {**counts, "total": sum(counts.values())}
        return {**counts, "accelerator_ran": self.accelerator_ran} if self.accelerator_ran else counts

    def testcase_add(self, case: ET.Element) -> None:
        outcome, problem = testcase_outcome(case)
        setattr(self, outcome, getattr(self, outcome) + 1)
        module = module_key(case)
        if module not in self.modules and len(self.modules) >= MAX_MODULES:
            module = ""
        counts = self.modules.setdefault(module, {})
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome != "skipped" and _testcase_property(case, "hw_classification").upper() == "ACCELERATOR":
            self.accelerator_ran += 1
        # pytest's stand-in for a module it could not import is no test: the job broke before any ran.
        collection_error = (
            outcome == "error" and not case.get("classname") and problem.get("message") == "collection failure"
        )
        # Every failure is counted; the first 1,000 keep details, as many as the relay stores.
        if outcome in FAILING_OUTCOMES and not collection_error and len(self.failures) < MAX_FAILED_TESTS:
            self.failures.append(_failed_test(case, problem, outcome))


def module_key(case: ET.Element) -> str:
    """The module a testcase reports: its classname without the class (`test.test_nn`, or a
    pytest function test's `test.test_foo`), else its file (`test/test_nn.py`), as the relay
    reads a test's module."""
    classname = (case.get("classname") or "").strip()
    head, _, last = classname.rpartition(".")
    module = head if last[:1].isupper() else classname
    return (module or (case.get("file") or "").strip())[:MAX_MODULE_CHARS]


def _tag(element: ET.Element) -> str:
    return element.tag.rsplit("}", 1)[-1] if isinstance(element.tag, str) else ""


def _first_child(element: ET.Element, tags: tuple[str, ...]) -> ET.Element | None:
    # Direct children only: <rerunFailure>/<flakyFailure> of a test that passed in the end are not failures.
    for child in element:
        if _tag(child) in tags:
            return child
    return None


def _failed_test(case: ET.Element, problem: ET.Element, outcome: str = "failed") -> FailedTest:
    return FailedTest(
        outcome=outcome,
        name=(case.get("name") or "(unnamed test)")[:MAX_NAME_CHARS],
        classname=(case.get("classname") or "")[:MAX_NAME_CHARS],
        file=(case.get("file") or "")[:MAX_NAME_CHARS],
        message=cut(_problem_message(problem), MAX_MESSAGE_BYTES),
        stacktrace=cut((problem.text or "").strip(), MAX_STACK_BYTES),
        hw_classification=_testcase_property(case, "hw_classification")[:32],
    )


def _names_exception(line: str, kind: str) -> bool:
    """Whether `line` reads "Type: ...", for `kind` given as "OutOfMemoryError" or "torch.OutOfMemoryError"."""
    return bool(kind) and line.split(":", 1)[0].strip().endswith(kind.rsplit(".", 1)[-1])


def _problem_message(problem: ET.Element) -> str:
    """One line naming the exception. pytest writes "AssertionError: assert 1 == 2" into
    `message`; unittest reporters put the type in `type`, and sometimes only a traceback in the
    text, whose "Type: message" line comes last."""
    message = (problem.get("message") or "").strip()
    kind = (problem.get("type") or "").strip()
    if not message:
        lines = [line.strip() for line in (problem.text or "").splitlines() if line.strip()]
        named = [line for line in lines if _names_exception(line, kind)]
        message = named[-1] if named else (lines[0] if lines else "")
    if kind and not _names_exception(message, kind):
        return f"{kind}: {message}" if message else kind
    return message


def _testcase_property(case: ET.Element, name: str) -> str:
    # pytest's record_property("hw_classification", ...) lands in the testcase's <properties>.
    properties = _first_child(case, ("properties",))
    for prop in properties if properties is not None else ():
        if _tag(prop) == "property" and prop.get("name") == name:
            return prop.get("value") or ""
    return ""


def junit_paths(patterns: Iterable[str]) -> list[str]:
    found = {}  # a dict as an ordered set: two patterns may match the same file
    for pattern in patterns:
        matches = sorted(path for path in glob.glob(pattern, recursive=True) if os.path.isfile(path))
        if not matches:
            log("warning", f"--junit {pattern!r} matched no files")
        found.update(dict.fromkeys(matches))
    return list(found)


def junit_file_read(path: str, summary: JUnitSummary) -> None:
    """Add one report's testcases to `summary`, streaming, so a report of any size fits in memory.
    Well-formed XML that is not JUnit (a coverage.xml caught by the glob, say) is skipped."""
    try:
        with open(path, "rb") as handle:
            root = None
            for event, element in ET.iterparse(handle, events=("start", "end")):
                if root is None:
                    root = element
                    if _tag(root) not in ("testsuites", "testsuite"):
                        log("warning", f"{path} is not a JUnit report (its root element is <{_tag(root)}>); skipped")
                        return
                elif event == "end" and _tag(element) == "testcase":
                    summary.testcase_add(element)
                    element.clear()
    except ET.ParseError as exc:
        raise BadInput(f"{path} is not well-formed JUnit XML: {exc}") from None
    except OSError as exc:
        raise BadInput(f"{path} cannot be read: {exc.strerror or exc}") from None
    summary.files.append(path)


def junit_read(patterns: list[str]) -> JUnitSummary | None:
    """Counts and failed tests of every file the patterns match; None when none matched (a job
    can die before writing any, and its result must still be reported)."""
    paths = junit_paths(patterns)
    if not paths:
        log("warning", "no JUnit report found; reporting without test results")
        return None
    summary = JUnitSummary()
    for path in paths:
        junit_file_read(path, summary)
    return summary


# --- the CI environment -------------------------------------------------------------------------


@dataclass
class RunFacts:
    name: str
    url: str | None
    run_id: str
    run_attempt: str
    job_name: str
    check_run_id: str


def ci_provider(env) -> str:
    if env.get("GITHUB_ACTIONS") == "true":
        return "github"
    if env.get("BUILDKITE") == "true":
        return "buildkite"
    if env.get("GITLAB_CI") == "true":
        return "gitlab"
    return ""


def _github_facts(env) -> dict:
    run_id, repo = env.get("GITHUB_RUN_ID", ""), env.get("GITHUB_REPOSITORY", "")
    server = env.get("GITHUB_SERVER_URL", "https://github.com")
    return {
        "name": env.get("GITHUB_WORKFLOW"),
        "url": f"{server}/{repo}/actions/runs/{run_id}" if repo and run_id else None,
        "run_id": run_id,
        "run_attempt": env.get("GITHUB_RUN_ATTEMPT"),
        "job_name": env.get("GITHUB_JOB"),
    }


def _digits(value: str) -> bool:
    """1–18 ASCII digits: str.isdigit() also accepts "²", which int() refuses (as the server reads them)."""
    return value.isascii() and value.isdigit() and len(value) <= 18


def _buildkite_facts(env) -> dict:
    # The build number rather than BUILDKITE_BUILD_ID: the existing relay wants an integer run id,
    # and the number is unique within the pipeline the token names anyway.
    retries = env.get("BUILDKITE_RETRY_COUNT") or "0"
    job_id, build_url = env.get("BUILDKITE_JOB_ID", ""), env.get("BUILDKITE_BUILD_URL")
    return {
        "name": env.get("BUILDKITE_PIPELINE_SLUG"),
        "url": f"{build_url}#{job_id}" if build_url and job_id else build_url,
        "run_id": env.get("BUILDKITE_BUILD_NUMBER"),
        "run_attempt": str(int(retries) + 1) if _digits(retries) else None,
        "job_name": env.get("BUILDKITE_LABEL") or env.get("BUILDKITE_STEP_KEY"),
        "check_run_id": job_id,
    }


def _gitlab_facts(env) -> dict:
    # The job id as the run id: GitLab has no retry counter, and a retried job keeps its pipeline
    # and name, so with the pipeline id its in-progress would contradict the first try's result.
    return {
        "name": env.get("CI_PIPELINE_NAME") or env.get("CI_PROJECT_PATH"),
        "url": env.get("CI_JOB_URL") or env.get("CI_PIPELINE_URL"),
        "run_id": env.get("CI_JOB_ID"),
        "job_name": env.get("CI_JOB_NAME"),
        "check_run_id": env.get("CI_JOB_ID"),
    }


def run_facts(args, env) -> RunFacts:
    detect = {"github": _github_facts, "buildkite": _buildkite_facts, "gitlab": _gitlab_facts}.get(ci_provider(env))
    found = detect(env) if detect else {}
    facts = RunFacts(
        name=args.workflow_name or found.get("name") or "",
        url=args.workflow_url or found.get("url") or None,
        run_id=args.run_id or found.get("run_id") or "",
        run_attempt=args.run_attempt or found.get("run_attempt") or "1",
        job_name=args.job_name or found.get("job_name") or "",
        check_run_id=args.check_run_id or found.get("check_run_id") or "",
    )
    if not facts.name or not facts.run_id:
        where = (
            f"this {ci_provider(env)} job"
            if ci_provider(env)
            else "this machine (not GitHub Actions, Buildkite or GitLab CI)"
        )
        raise UsageError(f"cannot tell the workflow name and run id on {where}: pass --workflow-name and --run-id")
    if not _digits(facts.run_attempt) or int(facts.run_attempt) < 1:
        raise UsageError(f"the run attempt must be a positive integer, not {facts.run_attempt!r}")
    return facts


# --- the dispatch being answered ----------------------------------------------------------------


def _json_load(text: str, origin: str):
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BadInput(f"{origin} is not valid JSON: {exc}") from None


def _file_json(path: str, origin: str):
    try:
        with open(path, encoding="utf-8") as handle:
            return _json_load(handle.read(), f"{origin} ({path})")
    except OSError as exc:
        raise BadInput(f"{origin} {path} cannot be read: {exc.strerror or exc}") from None


def _payload_source(args, env) -> tuple[object, str]:
    """(parsed JSON, where it came from), in the order --help documents."""
    if args.payload:
        return _file_json(args.payload, "--payload"), "--payload"
    text = (env.get("CRCR_CLIENT_PAYLOAD") or "").strip()
    if text:
        if text.startswith("{") or not os.path.isfile(text):
            return _json_load(text, "CRCR_CLIENT_PAYLOAD"), "CRCR_CLIENT_PAYLOAD"
        return _file_json(text, "CRCR_CLIENT_PAYLOAD"), "CRCR_CLIENT_PAYLOAD"  # a GitLab "file" variable
    if env.get("GITHUB_EVENT_PATH"):
        return _file_json(env["GITHUB_EVENT_PATH"], "GITHUB_EVENT_PATH"), "the GitHub event"
    raise BadInput(
        "no dispatch to answer: set CRCR_CLIENT_PAYLOAD or pass --payload (outside GitHub Actions), "
        "or use --event-type nightly|periodic --delivery-id SHA for a self-report"
    )


def _json_or_file(text: str, origin: str, opener: str):
    """JSON given inline (it starts with `opener`), else the path of a file holding it."""
    text = text.strip()
    if text.startswith(opener) or not os.path.isfile(text):
        return _json_load(text, origin)
    return _file_json(text, origin)


def failed_tests_detail_read(text: str) -> list[FailedTest]:
    """The action's `failed-tests-detail`: a JSON array of {name, classname, message, stacktrace,
    duration}, `name` required; the first 1,000 are kept (the relay's cap), each cut as JUnit's are."""
    items = _json_or_file(text, "--failed-tests-detail", "[")
    if not isinstance(items, list):
        raise BadInput("--failed-tests-detail must be a JSON array of {name, classname, message, stacktrace}")
    if len(items) > MAX_FAILED_TESTS:
        log("warning", f"only the first {MAX_FAILED_TESTS} of {len(items)} failed tests are sent (the relay's limit)")
    return [_detail_test(item, index) for index, item in enumerate(items[:MAX_FAILED_TESTS])]


def _detail_test(item, index: int) -> FailedTest:
    where = f"--failed-tests-detail[{index}]"
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
        raise BadInput(f"{where} needs a non-empty 'name' string")
    fields = {}
    for key in ("classname", "file", "message", "stacktrace"):
        value = item.get(key)
        if value is not None and not isinstance(value, str):
            raise BadInput(f"{where}.{key} must be a string")
        fields[key] = value or ""
    return FailedTest(name=item["name"][:MAX_NAME_CHARS], **fields)


def triage_verdict_read(text: str | None):
    """The action's `triage-verdict`, or None. It is advice: one that is not a JSON object of at
    most 16 KB is left out with a warning and never costs the report. The relay judges the rest."""
    if not text or not text.strip():
        return None
    try:
        verdict = _json_or_file(text, "--triage-verdict", "{")
    except BadInput as exc:
        log("warning", f"{exc}; the triage verdict is left out of the report")
        return None
    size = len(json.dumps(verdict, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"))
    if not isinstance(verdict, dict) or size > MAX_VERDICT_BYTES:
        problem = "is not a JSON object" if not isinstance(verdict, dict) else f"is {size} bytes, over 16 KB"
        log("warning", f"--triage-verdict {problem}; it is left out of the report")
        return None
    return verdict


def dispatch_read(args, env) -> dict:
    """The client_payload the relay dispatched, to be echoed back as the relay expects."""
    data, origin = _payload_source(args, env)
    if isinstance(data, dict) and "client_payload" in data:
        data = data["client_payload"]  # a whole repository_dispatch event
    elif origin == "the GitHub event":
        data = None  # an event of another kind (push, workflow_dispatch, ...)
    if not isinstance(data, dict):
        event = env.get("GITHUB_EVENT_NAME") or "not repository_dispatch"
        raise BadInput(
            f"{origin} holds no client_payload object (event: {event}): only runs the relay dispatched can "
            "report, other runs can self-report with --event-type nightly|periodic --delivery-id SHA"
        )
    if not isinstance(data.get("delivery_id"), str) or not data["delivery_id"].strip():
        raise BadInput(f"the client_payload from {origin} has no delivery_id; pass it on unchanged from the dispatch")
    return {key: value for key, value in data.items() if key != "workflow"}


def self_report_base(event_type: str, sha: str) -> dict:
    """What the existing action sends for nightly and periodic runs in place of a dispatch."""
    return {
        "event_type": event_type,
        "delivery_id": sha,
        "payload": {"repository": {"full_name": UPSTREAM_REPO}, "head_sha": sha},
    }


# --- the callback body --------------------------------------------------------------------------


def now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def workflow_build(
    args,
    run: RunFacts,
    tests: dict | None,
    has_failed_tests: bool,
    verdict: dict | None = None,
    modules: dict | None = None,
) -> dict:
    """The `workflow` object: the existing action's fields in its order, then ours."""
    now, in_progress = now_iso(), args.status == "in_progress"
    workflow = {
        "schema_version": "1",
        "status": args.status,
        "conclusion": None if in_progress else args.conclusion,
        "name": run.name,
        "url": run.url,
        "run_attempt": run.run_attempt,
        "job_name": run.job_name,
        "check_run_id": run.check_run_id or f"{run.run_id}-{run.run_attempt}",
        "run_id": run.run_id,
        # A self-report is a single call, so it carries its start too (as the action does).
        "started_at": now if in_progress or args.event_type else None,
        "completed_at": None if in_progress else now,
    }
    if tests is not None:
        workflow["test_results"] = tests
    if modules:
        workflow["module_counts"] = modules
    if args.artifact_url:
        workflow["artifact_url"] = args.artifact_url
    if has_failed_tests:
        workflow["failed_tests"] = []  # filled by body_encode, which knows the size budget
    if args.env:
        workflow["environment"] = dict(args.env)
    if verdict is not None:
        workflow["triage_verdict"] = verdict
    return workflow


def _fitting_count(base_size: int, sizes: list[int]) -> int:
    """How many list entries, from the front, fit beside a body of `base_size` bytes."""
    total, count = base_size, 0
    for size in sizes:
        total += size + (2 if count else 0)  # json.dumps puts ", " between list items
        if total > MAX_BODY_BYTES:
            break
        count += 1
    return count


def body_encode(body: dict, failures: list[FailedTest]) -> tuple[bytes, int]:
    """(the JSON bytes to send, how many failed tests they list). If the details would push the
    body over the relay's 2 MB limit, stack traces and messages get shorter first, then the list
    loses its tail; the counts in test_results still tell the whole story."""
    workflow = body["workflow"]
    if "failed_tests" not in workflow:
        return json.dumps(body).encode(), 0
    base_size = len(json.dumps(body).encode())  # with an empty list
    for step, (stack_cap, message_cap) in enumerate(SHRINK_STEPS):
        entries = [test.as_json(message_cap, stack_cap) for test in failures]
        keep = _fitting_count(base_size, [len(json.dumps(entry).encode()) for entry in entries])
        if keep == len(entries) or step == len(SHRINK_STEPS) - 1:
            break
    if step:
        log(
            "warning",
            f"failed-test details shortened to fit the relay's 2 MB limit (stack traces to {stack_cap} bytes, messages to {message_cap})",
        )
    if keep < len(entries):
        log("warning", f"only the first {keep} of {len(entries)} failed tests fit in the relay's 2 MB limit")
    workflow["failed_tests"] = entries[:keep]
    return json.dumps(body).encode(), keep


# --- the OIDC token -----------------------------------------------------------------------------


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Following a redirect would send the token somewhere else; take it as the answer instead."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


OPENER = urllib.request.build_opener(_NoRedirects)
NETWORK_ERRORS = (urllib.error.URLError, http.client.HTTPException, OSError)
JWT_RE = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$")


def _jwt_checked(value, origin: str) -> str:
    value = value.strip() if isinstance(value, str) else ""
    if not value:
        raise TokenError(f"{origin} gave no token")
    if not JWT_RE.match(value):
        raise TokenError(f"{origin} does not hold a JWT (three dot-separated base64url parts)")  # never echo it
    return value


class ProvidedToken:
    """A token the CI minted before this script ran (GitLab id_tokens, a Buildkite step, ...)."""

    def __init__(self, value: str | None, origin: str):
        self.value = _jwt_checked(value, origin)

    def get(self, timeout: float) -> str:
        # The same token on every try is fine: the relay answers a repeat of the same callback
        # with the same token "duplicate", so a retry after a lost answer is safe.
        return self.value


class GitHubActionsToken:
    """Minted for every try: the relay accepts a token's jti for one callback only."""

    def __init__(self, request_url: str, request_token: str, audience: str):
        self.request_url, self.request_token, self.audience = request_url, request_token, audience

    def get(self, timeout: float) -> str:
        separator = "&" if "?" in self.request_url else "?"
        url = self.request_url + separator + urllib.parse.urlencode({"audience": self.audience})
        headers = {
            "Authorization": f"bearer {self.request_token}",
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        }
        try:
            with OPENER.open(urllib.request.Request(url, headers=headers), timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            exc.close()
            message = f"GitHub's OIDC token endpoint answered HTTP {exc.code}"
            if exc.code == 429 or exc.code >= 500:
                raise TransientProblem(message, during_token=True) from None
            raise TokenError(f"{message}; does the job have `permissions: id-token: write`?") from None
        except NETWORK_ERRORS as exc:
            raise TransientProblem(
                f"cannot reach GitHub's OIDC token endpoint: {_reason(exc)}", during_token=True
            ) from None
        try:
            value = json.loads(raw.decode("utf-8")).get("value")
        except (ValueError, AttributeError):
            value = None
        return _jwt_checked(value, "GitHub's OIDC token endpoint")


class BuildkiteAgentToken:
    """`buildkite-agent oidc request-token` for every try, asking for the organization and
    pipeline UUID claims the relay identifies pipelines by (slugs can be renamed and reused)."""

    def __init__(self, agent: str, audience: str):
        self.agent, self.audience = agent, audience

    def get(self, timeout: float) -> str:
        command = [
            self.agent,
            "oidc",
            "request-token",
            "--audience",
            self.audience,
            "--lifetime",
            "300",
            "--claim",
            "organization_id,pipeline_id",
        ]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            raise TransientProblem("buildkite-agent oidc request-token timed out", during_token=True) from None
        except OSError as exc:
            raise TokenError(f"cannot run buildkite-agent: {exc.strerror or exc}") from None
        if done.returncode != 0:
            last_line = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise TokenError(f"buildkite-agent oidc request-token failed (exit {done.returncode}): {last_line}")
        return _jwt_checked(done.stdout, "buildkite-agent oidc request-token")


def token_source(args, env):
    if args.token_env:
        return ProvidedToken(env.get(args.token_env), f"${args.token_env}")
    if env.get("CRCR_OIDC_TOKEN"):
        return ProvidedToken(env["CRCR_OIDC_TOKEN"], "$CRCR_OIDC_TOKEN")
    if env.get("ACTIONS_ID_TOKEN_REQUEST_URL") and env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN"):
        return GitHubActionsToken(
            env["ACTIONS_ID_TOKEN_REQUEST_URL"], env["ACTIONS_ID_TOKEN_REQUEST_TOKEN"], args.audience
        )
    provider = ci_provider(env)
    if provider == "github":
        raise TokenError(
            "GitHub Actions gave this job no OIDC token endpoint: add `permissions: id-token: write` "
            "to the job (runs for pull requests from forks never get one)"
        )
    if provider == "buildkite" and shutil.which("buildkite-agent", path=env.get("PATH")):
        return BuildkiteAgentToken(shutil.which("buildkite-agent", path=env.get("PATH")), args.audience)
    raise TokenError(
        f"no OIDC token: set CRCR_OIDC_TOKEN or pass --token-env NAME (GitLab: an `id_tokens` entry with aud {args.audience})"
    )


# --- talking to the relay -----------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    data: dict | None
    text: str
    retry_after: float | None

    @property
    def detail(self) -> str:
        if self.data is not None and "detail" in self.data:
            detail = self.data["detail"]
            return detail if isinstance(detail, str) else json.dumps(detail)
        return self.text.strip()[:500] or "(empty body)"


def _reason(exc: Exception) -> str:
    reason = getattr(exc, "reason", None) or exc
    return str(reason) or type(reason).__name__


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After in seconds (HTTP allows a delay or a date); None when absent or unreadable."""
    value = (value or "").strip()
    if _digits(value):
        return float(value)
    try:
        when = parsedate_to_datetime(value) if value else None
    except (TypeError, ValueError, IndexError):
        when = None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _answer(status: int, raw: bytes, headers) -> Answer:
    text = raw.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    return Answer(
        status, data if isinstance(data, dict) else None, text, retry_after_seconds(headers.get("Retry-After"))
    )


def relay_post(url: str, data: bytes, token: str, timeout: float) -> Answer:
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json",
        "Authorization": f"Bearer {token}",
        "User-Agent": USER_AGENT,
    }
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with OPENER.open(request, timeout=timeout) as response:
            return _answer(response.status, response.read(), response.headers)
    except urllib.error.HTTPError as exc:
        try:
            return _answer(exc.code, exc.read(), exc.headers)
        except NETWORK_ERRORS:
            return _answer(exc.code, b"", exc.headers)  # the status is the answer; its body got lost
        finally:
            exc.close()
    except NETWORK_ERRORS as exc:
        raise TransientProblem(f"no answer from {url}: {_reason(exc)}") from None


def _retry_safe(answer: Answer) -> bool:
    """Only when the relay says so: a rate limit or a passing outage, with a Retry-After."""
    return answer.status in (429, 503) and answer.retry_after is not None


def _backoff(tries: int) -> float:
    # Jitter, so that the jobs of a matrix that lost the relay together do not come back together.
    return min(MAX_BACKOFF, 2.0 ** (tries - 1)) * random.uniform(0.75, 1.25)


def _time_left(deadline: float, request_timeout: float) -> float:
    left = min(request_timeout, deadline - time.monotonic())
    if left <= 0:
        raise TransientProblem("no time left for another request")
    return left


def _describe(problem: Answer | TransientProblem) -> str:
    if isinstance(problem, Answer):
        return f"the relay answered HTTP {problem.status} ({problem.detail})"
    return str(problem)


def _give_up(problem: Answer | TransientProblem) -> ReportError:
    message = f"{_describe(problem)}, and --max-time ran out"
    if isinstance(problem, TransientProblem) and problem.during_token:
        return TokenError(message)
    return Unavailable(message)


def deliver(url: str, data: bytes, tokens, deadline: float, request_timeout: float) -> Answer:
    """POST until the relay answers something other than "try again later", or time runs out.
    Repeats are safe: the relay answers an identical callback "duplicate"."""
    tries = 0
    while True:
        tries += 1
        try:
            token = tokens.get(_time_left(deadline, request_timeout))
            answer = relay_post(url, data, token, _time_left(deadline, request_timeout))
            if not _retry_safe(answer):
                return answer
            problem, wait = answer, max(MIN_RETRY_WAIT, answer.retry_after)
        except TransientProblem as exc:
            problem, wait = exc, _backoff(tries)
        if time.monotonic() + wait >= deadline:
            raise _give_up(problem)
        log("info", f"{_describe(problem)}; trying again in {wait:.1f} s")
        time.sleep(wait)


# --- command line -------------------------------------------------------------------------------


def _env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key or len(key) > MAX_ENV_KEY_CHARS:
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE with a key of 1-{MAX_ENV_KEY_CHARS} characters, got {text!r}"
        )
    return key, value


def _http_url(text: str) -> str:
    parts = urllib.parse.urlsplit(text)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"expected an http(s) URL, got {text!r}")
    return text


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    relay = common.add_argument_group("the relay")
    relay.add_argument(
        "--url",
        type=_http_url,
        default=os.environ.get("CRCR_CALLBACK_URL") or None,
        help="the relay's callback URL (default: $CRCR_CALLBACK_URL; one of the two is required)",
    )
    relay.add_argument(
        "--audience",
        default=os.environ.get("CRCR_OIDC_AUDIENCE") or DEFAULT_AUDIENCE,
        help="OIDC audience to mint tokens for (default: $CRCR_OIDC_AUDIENCE, else %(default)s)",
    )
    relay.add_argument("--token-env", metavar="NAME", help="read the OIDC token from environment variable NAME")
    relay.add_argument(
        "--max-time",
        type=_seconds,
        default=DEFAULT_MAX_TIME,
        metavar="SECONDS",
        help="give up after this long, retries included (default: %(default)g)",
    )
    relay.add_argument(
        "--request-timeout",
        type=_seconds,
        default=DEFAULT_REQUEST_TIMEOUT,
        metavar="SECONDS",
        help="time allowed for one request (default: %(default)g)",
    )
    relay.add_argument("--dry-run", action="store_true", help="print the body instead of sending it (needs no token)")
    what = common.add_argument_group("what is reported")
    what.add_argument(
        "--payload", metavar="FILE", help="the dispatch's client_payload (or its whole event) as a JSON file"
    )
    what.add_argument(
        "--event-type", choices=SELF_REPORT_EVENTS, help="a self-report of a nightly or periodic run (completed only)"
    )
    what.add_argument(
        "--delivery-id", metavar="SHA", help="with --event-type: the 40-hex upstream commit that was tested"
    )
    what.add_argument(
        "--artifact-url", type=_http_url, metavar="URL", help="where this job's logs and artifacts can be seen"
    )
    what.add_argument(
        "--triage-verdict",
        metavar="JSON",
        help="an advisory triage verdict (schema_version 1, as the callback action's triage-verdict input), "
        "inline or a file path; one that is not a JSON object of at most 16 KB is left out with a warning",
    )
    what.add_argument(
        "--env",
        type=_env_pair,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="the test environment (device, sdk, driver, torch_version, ...); repeatable",
    )
    run = common.add_argument_group("the run (read from the CI's variables unless given)")
    run.add_argument("--workflow-name", help="workflow or pipeline name")
    run.add_argument("--workflow-url", help="link to the run")
    run.add_argument("--run-id", help="the run's id")
    run.add_argument("--run-attempt", help="the attempt, from 1")
    run.add_argument("--job-name", help="the job's name; must differ between the legs of a matrix")
    run.add_argument("--check-run-id", help="the job's id in its CI (default: RUNID-ATTEMPT)")
    return common


def parser_build() -> argparse.ArgumentParser:
    layout = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="crcr_report.py", description=__doc__, epilog=HELP_EPILOG, formatter_class=layout
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    commands = parser.add_subparsers(dest="command", metavar="{in-progress,completed}")
    commands.required = True
    common = _common_options()
    started = commands.add_parser(
        "in-progress",
        aliases=["in_progress"],
        parents=[common],
        epilog=HELP_EPILOG,
        formatter_class=layout,
        help="the job has started: send it first, as early as possible",
    )
    started.set_defaults(status="in_progress", conclusion=None, junit=[], test_results=None, failed_tests_detail=None)
    done = commands.add_parser(
        "completed",
        parents=[common],
        epilog=HELP_EPILOG,
        formatter_class=layout,
        help="the job has finished: send it even when earlier steps failed",
    )
    done.set_defaults(status="completed")
    done.add_argument(
        "--conclusion",
        help="success, failure, cancelled, ... (GitHub Actions: ${{ job.status }}); "
        "default: from BUILDKITE_COMMAND_EXIT_STATUS or CI_JOB_STATUS",
    )
    done.add_argument(
        "--junit",
        action="append",
        default=[],
        metavar="GLOB",
        help="JUnit XML reports to count tests and list failures from ('**' allowed); repeatable",
    )
    done.add_argument(
        "--failed-tests-detail",
        metavar="JSON",
        help="failed tests given directly, as the action's failed-tests-detail input: a JSON array of "
        "{name, classname, message, stacktrace, duration}, inline or a file path (instead of --junit)",
    )
    done.add_argument(
        "--test-results",
        metavar="JSON",
        help='counts given directly, as the action takes them: {"passed": 9, "failed": 1, "skipped": 0}',
    )
    return parser


def _conclusion(args, env) -> str:
    value = (args.conclusion or "").strip().lower()
    exit_status = env.get("BUILDKITE_COMMAND_EXIT_STATUS", "").strip()
    if not value and exit_status:
        value = "success" if exit_status == "0" else "failure"
    if not value and env.get("CI_JOB_STATUS") in ("success", "failed", "canceled"):
        value = env["CI_JOB_STATUS"]
    value = CONCLUSION_ALIASES.get(value, value)
    if not value:
        raise UsageError("completed needs --conclusion (on GitHub Actions: --conclusion ${{ job.status }})")
    if value not in CONCLUSIONS:
        raise UsageError(f"--conclusion {value!r} is not one of {', '.join(CONCLUSIONS)}")
    return value


def options_check(args, env) -> None:
    """Refuse here, before anything is sent, what the relay would refuse with a 400."""
    if args.status == "completed":
        args.conclusion = _conclusion(args, env)
        if args.junit and args.test_results:
            raise UsageError("give either --junit or --test-results, not both")
        if args.junit and args.failed_tests_detail:
            raise UsageError("give either --junit or --failed-tests-detail, not both")
    if bool(args.event_type) != bool(args.delivery_id):
        raise UsageError("--event-type and --delivery-id go together (a nightly or periodic self-report)")
    if args.event_type:
        if args.status != "completed":
            raise UsageError(f"a {args.event_type} self-report is a single `completed` call, with no in-progress")
        if not re.match(r"^[0-9a-fA-F]{40}$", args.delivery_id):
            raise UsageError("--delivery-id must be the 40-hex upstream commit SHA that was tested")
        args.delivery_id = args.delivery_id.lower()
    if len(dict(args.env)) > MAX_ENV_KEYS:
        raise UsageError(f"at most {MAX_ENV_KEYS} --env keys")
    if not args.url and not args.dry_run:
        raise UsageError(NO_URL)
    args.url = (args.url or "").rstrip("/")  # as the action does: the relay's path has no trailing slash


def _given_counts(text: str | None) -> dict | None:
    if not text:
        return None
    counts = _json_load(text, "--test-results")
    if not isinstance(counts, dict):
        raise BadInput('--test-results must be a JSON object such as {"passed": 9, "failed": 1, "skipped": 0}')
    return counts


HINTS = {
    401: "the relay refused the OIDC token (is --audience the relay's audience?)",
    403: "this CI identity may not report for this delivery",
    409: "the relay's record of this job contradicts this report",
    413: "the report is larger than the relay accepts",
}


def answer_check(answer: Answer) -> None:
    if answer.status == 429 or answer.status >= 500:
        raise Unavailable(f"the relay answered HTTP {answer.status}: {answer.detail}")
    if answer.status >= 300:
        hint = HINTS.get(answer.status, "the relay rejected the report")
        raise Rejected(f"{hint}: HTTP {answer.status}: {answer.detail}")


def _tests_summary(tests: dict | None, listed: int | None) -> str:
    if not tests:
        return ""
    summary = (
        f"; tests: {tests.get('passed', 0)} passed, {tests.get('failed', 0)} failed, {tests.get('skipped', 0)} skipped"
    )
    summary += "".join(f", {tests[key]} {key}" for key in ("error", "xfailed", "xpassed") if tests.get(key))
    return summary + (f", {listed} failed tests listed" if listed is not None else "")


def outcome_print(args, answer: Answer, tests: dict | None, listed: int | None) -> None:
    status = (answer.data or {}).get("status")
    if status == "ignored":
        print(
            f"crcr_report: the relay ignored this report: the repository is not registered, or only at L1 (HTTP {answer.status})"
        )
    elif status == "duplicate":
        print(
            f"crcr_report: the relay had already recorded this {args.status} report (duplicate, HTTP {answer.status})"
        )
    else:
        print(
            f"crcr_report: {args.status} reported, the relay answered HTTP {answer.status} {json.dumps(status)}{_tests_summary(tests, listed)}"
        )


def report(args, env) -> int:
    options_check(args, env)
    base = self_report_base(args.event_type, args.delivery_id) if args.event_type else dispatch_read(args, env)
    run = run_facts(args, env)
    junit = junit_read(args.junit) if args.junit else None
    tests = junit.counts() if junit else _given_counts(args.test_results)
    detail = failed_tests_detail_read(args.failed_tests_detail) if args.failed_tests_detail else None
    failures = junit.failures if junit else (detail or [])
    verdict = triage_verdict_read(args.triage_verdict)
    modules = junit.modules if junit else None
    workflow = workflow_build(args, run, tests, junit is not None or detail is not None, verdict, modules)
    data, listed = body_encode(dict(base, workflow=workflow), failures)
    if args.dry_run:
        print(data.decode())
        return EXIT_OK
    tokens = token_source(args, env)
    deadline = time.monotonic() + args.max_time  # the clock covers the network, not the parsing
    answer = deliver(args.url, data, tokens, deadline, args.request_timeout)
    answer_check(answer)
    outcome_print(args, answer, tests, listed if junit or detail is not None else None)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = parser_build().parse_args(argv)
    try:
        return report(args, os.environ)
    except ReportError as exc:
        log("error", str(exc))
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
