"""Parsing a callback body (the echoed client_payload plus a `workflow` object, as the existing
cross-repo-ci-relay-callback action sends it, plus our optional failed_tests and environment)
into a checked `Report`. Every problem is a `BadCallback` naming the field."""

import logging
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain
from urllib.parse import urlsplit

from relay.inputs import jsonin
from relay.inputs.params import aware_datetime, int_param

from ..models import MAX_FAILED_TESTS, NEVER_STARTED_RUN_ID, SELF_REPORT_EVENTS, Conclusion
from .triage_verdict import triage_verdict_read

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 1024
MAX_STACK_BYTES = 4096
MAX_NAME_CHARS = 1000
MAX_ENV_KEYS = 50
MAX_ENV_VALUE_CHARS = 500
TRUNCATION_MARK = "… [truncated]"


class BadCallback(Exception):
    """400 with this message."""


@dataclass
class FailedTestReport:
    name: str
    classname: str = ""
    file: str = ""
    message: str = ""
    stacktrace: str = ""
    hw_classification: str = ""
    truncated: bool = False
    outcome: str = "failed"
    """failed, error or xpassed (relay.models.TestOutcome): the outcomes a row is kept for."""


@dataclass
class Report:
    delivery_key: str
    """The body's `delivery_id`, as the contract names it: the X-GitHub-Delivery the dispatch carried,
    or a self-report's own key (the SHA, or a per-job key). Stored as JobRun.delivery_key."""
    event_type: str
    status: str
    conclusion: str
    workflow_name: str
    run_id: str
    run_attempt: int
    job_name: str
    workflow_url: str
    artifact_url: str
    check_run_id: str
    started_at: datetime | None
    completed_at: datetime | None
    callback_token: str
    pr_number: int | None
    head_sha: str
    job_id: str = ""
    """Optional `workflow.job_id`: the CI's own id of the job (GitHub's numeric job id)."""
    pytorch_head_sha: str = ""
    """Top-level `pytorch_head_sha`: the upstream commit a self-report tested (vLLM's Buildkite
    reporter, vllm-project/vllm #51830, whose delivery_id is a per-job key instead)."""
    tests: dict = field(default_factory=dict)
    failed_tests: list[FailedTestReport] = field(default_factory=list)
    failed_tests_truncated: bool = False
    environment: dict = field(default_factory=dict)
    triage_verdict: dict | None = None
    """The normalised advisory verdict (relay.callbacks.triage_verdict), or None."""
    body: dict = field(default_factory=dict)

    @property
    def is_self_report(self) -> bool:
        return self.event_type in SELF_REPORT_EVENTS

    @property
    def job_key(self) -> str:
        return f"{self.delivery_key}:{self.run_id}:{self.run_attempt}:{self.job_name}"


MAX_COUNT = 2**31 - 1
COUNTED = ("passed", "failed", "skipped", "error", "xfailed", "xpassed")
"""The outcomes `workflow.test_results` may count (pytest's summary words, torch-spyre's too)."""
COUNT_ALIASES = {"errors": "error"}
"""pytest's summary line says `2 errors`; its stats key is `error`."""
ACCELERATOR_RAN = "accelerator_ran"
"""Of the tests run (not skipped), how many the report classifies ACCELERATOR (pytest's
record_property("hw_classification"), as the accelerator group's in-scope suite is marked): our
client counts it from JUnit, so coverage can be judged over the in-scope tests. Not an outcome, so
never part of `total`."""
COUNT_KEYS = (*COUNTED, "errors", "total", ACCELERATOR_RAN)
TEST_OUTCOMES = ("failed", "error", "xpassed")
"""What `workflow.failed_tests[].outcome` may say (default failed)."""


def body_parse(raw: bytes) -> dict:
    """The body as a JSON object, refusing what no database can store or encode again (NUL,
    lone surrogates, NaN/Infinity, nesting past relay.inputs.jsonin.MAX_DEPTH), each as a 400."""
    body = json_read(raw or b"{}", "body")
    if not isinstance(body, dict):
        raise BadCallback("body must be a JSON object")
    return body


def json_read(raw, what: str, depth: int = 0, not_json: str = ""):
    """JSON text at `depth` in the body (a field sent as a string holding JSON, which the action
    allows) read with every check the body itself passes, as if the value stood in its place;
    text that is no JSON at all is `not_json` (by default: what the parser said)."""
    try:
        return jsonin.checked(raw, what=what, max_depth=jsonin.MAX_DEPTH - depth)
    except jsonin.NotStorable as exc:
        raise BadCallback(str(exc)) from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadCallback(not_json or f"{what} is not valid JSON: {exc}") from exc


def report_read(body: dict) -> Report:
    workflow = body.get("workflow")
    if not isinstance(workflow, dict):
        raise BadCallback("callback body missing required field: 'workflow' (an object)")
    status = _choice(workflow, "status", ("in_progress", "completed"))
    event_type = _text(body, "event_type", required=False, limit=32)
    report = Report(
        delivery_key=_text(body, "delivery_id", limit=100),
        event_type=event_type or "",
        status=status,
        conclusion=_conclusion(workflow, status),
        workflow_name=_text(workflow, "name", limit=255, label="workflow.name"),
        run_id=_run_id(workflow),
        run_attempt=_attempt(workflow),
        job_name=_text(workflow, "job_name", required=False, limit=255, label="workflow.job_name"),
        workflow_url=_url(workflow, "url"),
        artifact_url=_url(workflow, "artifact_url"),
        check_run_id=_text(
            workflow, "check_run_id", required=False, limit=100, label="workflow.check_run_id", numbers=True
        ),
        job_id=_text(workflow, "job_id", required=False, limit=100, label="workflow.job_id", numbers=True),
        started_at=_when(workflow, "started_at"),
        completed_at=_when(workflow, "completed_at"),
        callback_token=_text(body, "callback_token", required=False, limit=4000),
        pr_number=None,
        head_sha="",
        pytorch_head_sha=_text(body, "pytorch_head_sha", required=False, limit=64).strip().lower(),
        body=body,
    )
    _upstream_context(report, body)
    report.tests = _test_counts(workflow.get("test_results"))
    report.failed_tests, report.failed_tests_truncated = _failed_tests(workflow.get("failed_tests"))
    # A client may cut the list itself (ours does, to the same cap): more failures counted than
    # listed means the list is partial.
    if report.tests.get("failed", 0) > len(report.failed_tests) and report.failed_tests:
        report.failed_tests_truncated = True
    report.environment = _environment(workflow.get("environment"))
    module_counts_check(
        workflow.get("module_counts")
    )  # kept in the stored body; relay.enablement writes them off the callback
    report.triage_verdict, dropped = triage_verdict_read(workflow.get("triage_verdict"))
    if dropped:  # advice only: the callback is recorded as if no verdict had been sent
        logger.warning("callback %s: triage verdict dropped: %s", report.delivery_key[:100], dropped)
    return report


def _text(
    obj: dict, key: str, *, required: bool = True, limit: int, label: str | None = None, numbers: bool = False
) -> str:
    label = label or key
    value = obj.get(key)
    if value is None or value == "":
        if required:
            raise BadCallback(f"callback body missing required field: '{label}'")
        return ""
    if numbers and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise BadCallback(f"'{label}' must be a string")
    if len(value) > limit:
        raise BadCallback(f"'{label}' is longer than {limit} characters")
    return value


def _choice(obj: dict, key: str, allowed: tuple) -> str:
    value = obj.get(key)
    if value not in allowed:
        raise BadCallback(
            f"unknown callback status: {value!r} (expected one of {', '.join(allowed)})"
            if value
            else f"callback body missing required field: 'workflow.{key}'"
        )
    return value


def _conclusion(workflow: dict, status: str) -> str:
    value = workflow.get("conclusion")
    if status == "in_progress":
        return ""
    if isinstance(value, str):
        value = value.strip()
    if not value:
        raise BadCallback("a completed callback needs 'workflow.conclusion'")
    if value not in Conclusion.values:
        raise BadCallback(
            f"'workflow.conclusion' {value!r} is not a GitHub check conclusion ({', '.join(Conclusion.values)})"
        )
    return value


def _run_id(workflow: dict) -> str:
    value = workflow.get("run_id")
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip() or len(value) > 100:
        raise BadCallback(
            "'workflow.run_id' must be a non-empty string or number"
            if value not in (None, "")
            else "callback body missing required field: 'workflow.run_id'"
        )
    if value.strip() in ("0", NEVER_STARTED_RUN_ID):
        # "-" is the run of the sweeper's "never started" row: a callback keyed by it would be that row's.
        raise BadCallback(f"'workflow.run_id' {value.strip()} is reserved")
    return value.strip()


def _attempt(workflow: dict) -> int:
    """A JSON integer, or its ASCII digits as text (the action sends `github.run_attempt`, a
    string): `int()` would read `"1_0"` as 10, `"١"` as 1 and `2.9` as 2."""
    value = workflow.get("run_attempt", 1)
    if value in (None, ""):
        return 1
    attempt = value if isinstance(value, int) and not isinstance(value, bool) else int_param(value)
    if attempt is None or attempt < 1 or attempt > 10_000:
        raise BadCallback("'workflow.run_attempt' must be a positive integer (string or number)")
    return attempt


def _url(workflow: dict, key: str) -> str:
    value = _text(workflow, key, required=False, limit=1000, label=f"workflow.{key}")
    if value and (urlsplit(value).scheme.lower() not in ("http", "https") or not urlsplit(value).netloc):
        raise BadCallback(f"'workflow.{key}' must be an http or https URL")
    return value


def _when(workflow: dict, key: str) -> datetime | None:
    value = workflow.get(key)
    if value in (None, ""):
        return None
    parsed = aware_datetime(value)
    if parsed is None:
        raise BadCallback(
            f"'workflow.{key}' must be an ISO-8601 timestamp with a time zone, between years 1 and 9999 in UTC"
        )
    return parsed


def _upstream_context(report: Report, body: dict) -> None:
    payload = body.get("payload")
    if payload is not None and not isinstance(payload, dict):
        raise BadCallback("'payload' must be an object")
    payload = payload or {}
    pr = payload.get("pull_request") if isinstance(payload.get("pull_request"), dict) else {}
    number = pr.get("number", payload.get("number"))
    report.pr_number = number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else None
    head = pr.get("head") if isinstance(pr.get("head"), dict) else {}
    sha = head.get("sha") or payload.get("after") or payload.get("head_sha") or ""
    report.head_sha = str(sha)[:40].lower() if isinstance(sha, str) else ""
    if report.is_self_report:
        report.head_sha = report.pytorch_head_sha or report.delivery_key.lower()


def _json_field(value, name: str, kind: type, must: str):
    """`workflow.<name>`, which the action may send as JSON text as well as in place: the value,
    of `kind`, or a 400 saying what it must be."""
    if isinstance(value, str):
        value = json_read(value, f"'workflow.{name}' (JSON text)", 2, f"'workflow.{name}' must be {must}")
    if not isinstance(value, kind):
        raise BadCallback(f"'workflow.{name}' must be {must}")
    return value


def _test_counts(value) -> dict:
    if value in (None, ""):
        return {}
    value = _json_field(value, "test_results", dict, "an object of counts")
    counts = {}
    for key in COUNT_KEYS:
        if value.get(key) is None:
            continue
        count = value[key]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0 or count > MAX_COUNT:
            raise BadCallback(f"'workflow.test_results.{key}' must be a non-negative integer below 2**31")
        counts[COUNT_ALIASES.get(key, key)] = counts.get(COUNT_ALIASES.get(key, key), 0) + count
    if counts and "total" not in counts:
        counts["total"] = sum(counts.get(k, 0) for k in COUNTED)
    return counts


MAX_MODULES = 2000
"""Modules one job may count: PyTorch's test/ holds about 1,100 files."""
MAX_MODULE_CHARS = 300
MODULE_OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def module_counts_read(value) -> dict[str, dict[str, int]]:
    """`workflow.module_counts`: {module: {outcome: count}} as the client sends it (a module as
    reported: `test/test_nn.py`, `test.test_nn`, …; relay.policy.testids.module_of reads it), each
    count as in test_results (`errors` read as `error`; other keys ignored). Also the reader of
    a stored body's counts (relay.enablement.counts)."""
    if value in (None, ""):
        return {}
    value = _json_field(value, "module_counts", dict, "an object of {module: {outcome: count}}")
    if len(value) > MAX_MODULES:
        raise BadCallback(f"'workflow.module_counts' counts more than {MAX_MODULES} modules")
    return {_module_name(name): _module_outcomes(name, counts) for name, counts in value.items()}


def module_counts_check(value) -> None:
    """What `module_counts_read` refuses, refused in its words, without building its answer: the
    callback stores the body as sent and relay.enablement reads the counts off the callback. A job
    that ran all of PyTorch's test/ counts ~1,100 modules, which `module_counts_read` took 0.5 ms
    to read one by one; counts that are plainly valid are told in a few passes over them all."""
    if not _plainly_counted(value):
        module_counts_read(value)


COUNTED_KEYS = frozenset((*MODULE_OUTCOMES, *COUNT_ALIASES))


def _plainly_counted(value) -> bool:
    """Whether `value` is counts `module_counts_read` would take as they are: an object of at most
    MAX_MODULES names within MAX_MODULE_CHARS, each an object of only outcome keys, every count
    an integer from 0 to MAX_COUNT (a JSON boolean is no integer here). False is no refusal:
    anything else is read one by one."""
    if type(value) is not dict or not value or len(value) > MAX_MODULES:
        return False
    if max(map(len, value)) > MAX_MODULE_CHARS or set(map(type, value.values())) != {dict}:
        return False
    if not COUNTED_KEYS.issuperset(chain.from_iterable(value.values())):
        return False
    counts = list(chain.from_iterable(map(dict.values, value.values())))
    return not counts or (set(map(type, counts)) == {int} and min(counts) >= 0 and max(counts) <= MAX_COUNT)


def _module_name(name: str) -> str:
    if len(name) > MAX_MODULE_CHARS:
        raise BadCallback(f"'workflow.module_counts' has a module name longer than {MAX_MODULE_CHARS} characters")
    return name


def _module_outcomes(name: str, counts) -> dict[str, int]:
    label = f"'workflow.module_counts.{name[:100]}'"
    if not isinstance(counts, dict):
        raise BadCallback(f"{label} must be an object of counts")
    outcomes = {}
    for key, count in counts.items():
        outcome = COUNT_ALIASES.get(key, key)
        if outcome not in MODULE_OUTCOMES or count is None:
            continue
        if isinstance(count, bool) or not isinstance(count, int) or count < 0 or count > MAX_COUNT:
            raise BadCallback(f"{label}.{key} must be a non-negative integer below 2**31")
        outcomes[outcome] = outcomes.get(outcome, 0) + count
    return outcomes


def _failed_tests(value) -> tuple[list[FailedTestReport], bool]:
    if value is None:
        return [], False
    value = _json_field(value, "failed_tests", list, "a list")  # the action's failed-tests-detail may arrive unparsed
    tests = [_failed_test(item, index) for index, item in enumerate(value[:MAX_FAILED_TESTS])]
    return tests, len(value) > MAX_FAILED_TESTS


def _failed_test(item, index: int) -> FailedTestReport:
    if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
        raise BadCallback(f"'workflow.failed_tests[{index}]' needs a 'name' string")
    fields = {}
    for key in ("classname", "file", "message", "stacktrace", "hw_classification", "outcome"):
        raw = item.get(key)
        if raw is not None and not isinstance(raw, str):
            raise BadCallback(f"'workflow.failed_tests[{index}].{key}' must be a string")
        fields[key] = raw or ""
    message, cut_message = text_cap(fields["message"], MAX_MESSAGE_BYTES)
    stack, cut_stack = text_cap(fields["stacktrace"], MAX_STACK_BYTES)
    cut_message = cut_message or message.endswith(TRUNCATION_MARK)
    cut_stack = cut_stack or stack.endswith(TRUNCATION_MARK)
    outcome = fields["outcome"] or "failed"
    if outcome not in TEST_OUTCOMES:
        raise BadCallback(f"'workflow.failed_tests[{index}].outcome' must be one of {', '.join(TEST_OUTCOMES)}")
    return FailedTestReport(
        name=item["name"][:MAX_NAME_CHARS],
        classname=fields["classname"][:MAX_NAME_CHARS],
        file=fields["file"][:MAX_NAME_CHARS],
        message=message,
        stacktrace=stack,
        hw_classification=fields["hw_classification"][:32].upper(),
        truncated=cut_message or cut_stack,
        outcome=outcome,
    )


def text_cap(text: str, limit: int) -> tuple[str, bool]:
    data = text.encode("utf-8", errors="replace")  # a lone surrogate must not crash the cut
    if len(data) <= limit:
        return text, False
    keep = limit - len(TRUNCATION_MARK.encode())
    return data[:keep].decode(errors="ignore") + TRUNCATION_MARK, True


def _environment(value) -> dict:
    if value in (None, ""):
        return {}
    if not isinstance(value, dict) or len(value) > MAX_ENV_KEYS:
        raise BadCallback(f"'workflow.environment' must be an object of at most {MAX_ENV_KEYS} strings")
    env = {}
    for key, item in value.items():
        if not isinstance(item, (str, int, float)) or isinstance(item, bool) or len(key) > 64:
            raise BadCallback(f"'workflow.environment.{key[:64]}' must be a string")
        env[key] = str(item)[:MAX_ENV_VALUE_CHARS]
    return env
