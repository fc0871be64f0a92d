"""POST /github/callback: verify who is calling, bind the call to a dispatch the relay really
sent, and advance the job's state machine together with its stored results, atomically."""

import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from relay.policy.links import short_sha
from relay.stats.runkinds import on_trunk, pr_heads

from .. import follow_up
from ..github import upstream
from ..github.repo_ids import GitHubUnreachable
from ..models import (
    BISECT_EVENT,
    Delivery,
    Dispatch,
    JobRun,
    Level,
    Project,
    UsedToken,
    is_probe_key,
)
from . import job_rows
from .body import BadCallback, Report, body_parse, report_read
from .identity import IdentityForbidden, project_for_token
from .oidc import KeyServerUnavailable, TokenRejected, VerifiedToken, bearer_token, token_verify
from .ratelimit import rate_limit_asked
from .tokens import CallbackBinding, InvalidCallbackToken, callback_token_read

logger = logging.getLogger(__name__)
SHA_RE = re.compile(r"^[0-9a-f]{40}$")


@dataclass
class CallbackResult:
    status: int
    body: dict
    headers: dict = field(default_factory=dict)


class Conflict(Exception):
    """409: the callback contradicts the recorded state."""


class Forbidden(Exception):
    """403."""


def _ok(status: str, headers: dict | None = None) -> CallbackResult:
    return CallbackResult(200, {"ok": True, "status": status}, headers or {})


def callback_receive(authorization: str | None, raw: bytes) -> CallbackResult:
    try:
        return _receive(authorization, raw)
    except BadCallback as exc:
        return CallbackResult(400, {"detail": str(exc)})
    except TokenRejected as exc:
        return CallbackResult(401, {"detail": str(exc)}, {"WWW-Authenticate": 'Bearer error="invalid_token"'})
    except (IdentityForbidden, Forbidden) as exc:
        return CallbackResult(403, {"detail": str(exc)})
    except Conflict as exc:
        return CallbackResult(409, {"detail": str(exc)})
    except (KeyServerUnavailable, upstream.UpstreamUnavailable, GitHubUnreachable) as exc:
        return CallbackResult(503, {"detail": str(exc)}, {"Retry-After": "30"})


def _receive(authorization: str | None, raw: bytes) -> CallbackResult:
    body = body_parse(raw)
    token = token_verify(bearer_token(authorization))
    project = project_for_token(token)
    if project is None or not project.active or project.level == Level.L1:
        return _ok("ignored")
    with rate_limit_asked(project.full_name, project.rate_limit_per_min) as asked:
        # While the limiter answers, the report is read and its callback_token checked: a repo
        # over its limit still hears 429, whatever its report says.
        answer, refusal = _bound(project, body)
        decision = asked.decision()
    headers = {"X-RateLimit-Degraded": "true"} if decision.degraded else {}
    if not decision.allowed:
        return CallbackResult(
            429, {"detail": f"rate limit exceeded for {project.full_name}"}, {"Retry-After": str(decision.retry_after)}
        )
    if refusal is not None:
        raise refusal
    if answer.report.is_self_report:
        return _ok(self_report_record(answer, token), headers)
    return _ok(job_record(answer, token), headers)


def _bound(project: Project, body: dict):
    """(what the callback answers, None), or (None, what was raised on the way: a refusal, or a
    database error), to be raised once the rate limit has had its say."""
    try:
        report = report_read(body)
        if is_probe_key(report.delivery_key):
            report.event_type = BISECT_EVENT  # a probe's jobs are the bisection's, whatever it says
        return Answer(project, report, None if report.is_self_report else binding_read(project, report)), None
    except Exception as exc:  # noqa: BLE001 - raised by the caller after the 429 check
        return None, exc


# --- binding ----------------------------------------------------------------------------------------


@dataclass
class Answer:
    """What a callback answers: its report, what its callback_token binds (None without one, and
    for a self-report), and the dispatch, looked up when first needed. The common callback never
    needs it: a new row finds its dispatch in its own statement, and a completion finds its row
    (the one made for that dispatch, with the PR and head SHA the binding names) (`_job_change`)."""

    project: Project
    report: Report
    binding: CallbackBinding | None = None
    looked_up: Dispatch | None = None
    """The dispatch once `dispatch()` found it; read it through `dispatch()`."""

    def dispatch(self) -> Dispatch | None:
        """The dispatch this callback answers (None for a self-report); its refusals raise."""
        if self.looked_up is None and not self.report.is_self_report:
            self.looked_up = dispatch_for(self.project, self.report, self.binding)
        return self.looked_up


def token_required(project: Project) -> bool:
    if project.require_callback_token is not None:
        return project.require_callback_token
    return project.level in (Level.L3, Level.L4)


def binding_read(project: Project, report: Report) -> CallbackBinding | None:
    """The delivery, repository, PR and head SHA the echoed callback_token binds, once it proves
    to be the relay's, for this delivery and repository, and to agree with the echoed payload;
    None when the report echoes none and its project does not require one."""
    if not report.callback_token:
        if token_required(project):
            raise Forbidden(
                f"{project.full_name} must echo the callback_token of its dispatch (required at {project.level})"
            )
        return None
    try:
        binding = callback_token_read(report.callback_token)
    except InvalidCallbackToken as exc:
        raise Forbidden(str(exc)) from exc
    if (binding.delivery_guid, binding.repo) != (report.delivery_key, project.full_name.lower()):
        raise Forbidden(BINDING_MISMATCH)
    if report.pr_number not in (None, binding.pr_number) or report.head_sha not in ("", binding.head_sha):
        raise Forbidden("the echoed payload's PR or head SHA does not match the callback_token")
    return binding


BINDING_MISMATCH = "callback_token was issued for another delivery, repository, PR or head SHA"


def dispatch_for(project: Project, report: Report, binding: CallbackBinding | None) -> Dispatch:
    """The dispatch this callback answers; its stored PR and head SHA are the truth, not the
    echoed payload, and they must be the ones the callback_token binds."""
    dispatch = job_rows.dispatch_answered(report.delivery_key, project.pk)
    if dispatch is None:
        raise Forbidden(f"delivery {report.delivery_key} was never dispatched to {project.full_name}")
    if binding is not None and (binding.pr_number, binding.head_sha) != (dispatch.pr_number, dispatch.head_sha):
        raise Forbidden(BINDING_MISMATCH)
    return dispatch


# --- the state machine ----------------------------------------------------------------------------


KEPT = (
    "event_type",
    "workflow_url",
    "artifact_url",
    "check_run_id",
    "job_id",
    "reported_started_at",
    "environment",
    "triage_verdict",
)
"""What a completion keeps of its row when its report does not say it (an empty value): in_progress
may have said more. A new row takes each field's default instead."""


def job_record(answer: Answer, token: VerifiedToken) -> str:
    """Advance (delivery, repo, run, attempt, job) by one step, consuming the token with it.
    Exactly one of two identical concurrent callbacks wins; the other reads "duplicate".

    The common step (a dispatch's new in_progress row, or its in_progress row completed) is tried
    first where one statement can hold it (job_rows.change_with_token: PostgreSQL), which writes
    the row and the token together or nothing, and looks nothing up first; anything else, and
    whatever that statement did not apply, is decided in a transaction by `_job_step` (on SQLite
    the common step too: its change, then the token, and nothing looked up first either)."""
    project, report = answer.project, answer.report
    if _in_one_statement(answer):
        failed_tests = [vars(test) for test in report.failed_tests]
        job = job_rows.change_with_token(_job_change(answer), _token_row(token, report, project), failed_tests)
        if job is not None:
            follow_up.job_recorded(job.pk, _recorded(project, job))
            return report.status
    with transaction.atomic():
        outcome, job = _job_step(answer, token)
        if outcome != "duplicate":
            follow_up.job_recorded(job.pk, _recorded(project, job))
    return outcome


def _in_one_statement(answer: Answer) -> bool:
    """Whether the step can be the token's and the row's one statement: a dispatch's report (a
    self-report's token may carry every job of its run). A new row whose dispatch has a
    sweeper's row to drop is not written there (job_rows.FromDispatch), and comes here."""
    return not answer.report.is_self_report and job_rows.one_statement_changes()


def _sweeper_row_to_drop(dispatch: Dispatch | None) -> bool:
    """Whether a new row for `dispatch` ends the sweeper's "never started" row for it. A dispatch
    read elsewhere than `dispatch_answered` was not asked, and may have one."""
    return dispatch is not None and getattr(dispatch, "never_started_row", True)


def _recorded(project: Project, job: JobRun) -> follow_up.RecordedJob:
    return follow_up.RecordedJob(project.level, job.event_type, job.pr_number, job.status, job.conclusion, job.ended_by)


def _job_step(answer: Answer, token: VerifiedToken):
    """(outcome, the job as written), inside the callback's transaction: the report's change (or
    what the row's state answers instead), then the token consumed. In that order, as in the one
    statement (job_rows.change_with_token): both take the row's lock before the jti's, so neither
    waits on the other in turn; a token that carried another callback undoes the change."""
    outcome, job = _job_changed(answer)
    if not _token_consumed(token, answer.report, answer.project):
        transaction.set_rollback(True)
        return "duplicate", None
    return outcome, job


def _job_changed(answer: Answer):
    """The report's change applied, or what the row's state answers. The common change is tried
    first (`_job_change`: a new row finds its dispatch in its own statement, a completion its row),
    unless the one statement tried that new row already. What did not apply looks the dispatch up
    before anything else is decided (every 403 of `dispatch_for` first), and the row is made from
    it by its id (a completion's with its start unknown; a new row whose dispatch has a sweeper's
    "never started" row, which the common statement leaves alone). The row a concurrent callback
    made first is locked and asked again."""
    project, report = answer.project, answer.report
    key = _job_key(project, report)
    in_progress = report.status == JobRun.Status.IN_PROGRESS
    common = None if in_progress and _in_one_statement(answer) else _job_change(answer)
    job = _job_apply(report, common) if common is not None else None
    if job is None:
        answer.dispatch()
        job = _job_apply(report, _job_new(answer, key), answer.dispatch())
    if job is not None:
        return report.status, job
    existing = job_rows.job_locked(key)
    if not in_progress:
        job = _job_apply(report, common)  # in progress since the first try: final under the lock
        if job is not None:
            return report.status, job
    return _job_settled(existing, report), existing


def _job_settled(job: JobRun, report: Report) -> str:
    """What a report that changed nothing answers, the row locked: the same report again, or
    one that contradicts the row (in_progress after completed, another conclusion)."""
    if report.status == JobRun.Status.IN_PROGRESS:
        if job.status == JobRun.Status.IN_PROGRESS:
            return "duplicate"
        raise Conflict(
            f"job {report.job_name or report.workflow_name!r} attempt {report.run_attempt} already completed ({job.conclusion}); in_progress cannot follow completed"
        )
    if job.conclusion == report.conclusion:
        return "duplicate"
    raise Conflict(
        f"job already completed as {job.conclusion!r}; a second completion as {report.conclusion!r} contradicts it"
    )


def _job_key(project: Project, report: Report) -> dict:
    return {
        "delivery_key": report.delivery_key,
        "project_id": project.pk,
        "run_id": report.run_id,
        "run_attempt": report.run_attempt,
        "job_name": report.job_name,
    }


def _token_row(token: VerifiedToken, report: Report, project: Project) -> dict:
    """The UsedToken row that consumes this token for this callback, kept until it expires."""
    now = timezone.now()
    expires = now + timedelta(seconds=max(60, int(token.claims["exp"]) - int(now.timestamp()) + 120))
    return {
        "issuer": token.issuer.url,
        "jti": _token_jti(token),
        "expires_at": expires,
        "used_for": _token_use(report, project),
    }


def _token_consumed(token: VerifiedToken, report: Report, project: Project) -> bool:
    """False when this very token already carried this very callback (a safe retry). A nightly
    reporter may sign every job of one run with one token (vLLM's Buildkite reporter takes a single
    --oidc-token per build): there the token is bound to the run, and each job's delivery_id keeps
    the write idempotent."""
    if job_rows.token_insert(_token_row(token, report, project)):
        return True
    previous = UsedToken.objects.filter(issuer=token.issuer.url, jti=_token_jti(token)).first()
    if previous is not None and previous.used_for == _token_use(report, project):
        return report.is_self_report
    raise TokenRejected("this token was already used (jti replay); mint a fresh one for each callback")


def _token_jti(token: VerifiedToken) -> str:
    """The token's jti as UsedToken stores it (its column holds 200 characters)."""
    return str(token.claims["jti"])[:200]


def _token_use(report: Report, project: Project) -> str:
    if report.is_self_report:
        return f"{project.pk}:{report.event_type}-run:{report.workflow_name}:{report.run_id}"[:600]
    return f"{project.pk}:{report.job_key}:{report.status}"[:600]


def _job_change(answer: Answer) -> job_rows.Change:
    """What the report does in the common case: an in_progress makes its row from its dispatch; a
    completion completes the row in progress (or the one the sweeper ended) that was made for the
    dispatch it answers, as its callback_token binds it (for a self-report, the row of its key)."""
    report, key = answer.report, _job_key(answer.project, answer.report)
    if report.status == JobRun.Status.IN_PROGRESS:
        return _job_new(answer, key)
    fields = {**_report_fields(report), "status": JobRun.Status.COMPLETED, "ended_by": ""}
    bound = answer.binding
    as_bound = {"pr_number": bound.pr_number, "head_sha": bound.head_sha} if bound else {}
    made_for = "self-report" if report.is_self_report else "dispatch"
    return job_rows.job_complete_change(key, fields, KEPT, timezone.now(), made_for, as_bound)


def _job_new(answer: Answer, key: dict) -> job_rows.Change:
    """The report's new row: in progress, or completed with its start unknown. A dispatch's row
    takes its PR, head SHA and queue time from the dispatch (job_rows.FROM_DISPATCH): by its id
    once looked up, else found by the statement itself."""
    report, now = answer.report, timezone.now()
    said = {name: value for name, value in _report_fields(report).items() if value is not None or name not in KEPT}
    fields = {**key, **said, "status": report.status, "created_at": now}
    if report.status == JobRun.Status.IN_PROGRESS:
        fields.update(in_progress_at=now)
    else:
        fields.update(completed_at=now, start_unknown=True)
    if report.is_self_report:
        return job_rows.job_insert_change(
            {**fields, "dispatch_id": None, "pr_number": None, "head_sha": report.head_sha}
        )
    return job_rows.job_insert_change(fields, _made_from(answer))


def _made_from(answer: Answer) -> job_rows.FromDispatch:
    report, bound = answer.report, answer.binding
    rerun_of = report.run_id if report.status == JobRun.Status.IN_PROGRESS and report.run_attempt > 1 else None
    if answer.looked_up is not None:
        return job_rows.FromDispatch(id=answer.looked_up.pk, rerun_of=rerun_of)
    return job_rows.FromDispatch(
        delivery_guid=report.delivery_key,
        project_id=answer.project.pk,
        bound=(bound.pr_number, bound.head_sha) if bound else None,
        rerun_of=rerun_of,
    )


def _job_apply(report: Report, change: job_rows.Change, dispatch: Dispatch | None = None) -> JobRun | None:
    """`change` in the callback's transaction, with what goes with the row it wrote: the report's
    failed tests in place of the row's old ones, and for a new row of `dispatch`, the end of the
    sweeper's "never started" stand-in row for a dispatch that did start after all. None when
    the change did not apply."""
    job, had_failed_tests = job_rows.change_apply(change)
    if job is None:
        return None
    if had_failed_tests:
        job_rows.failed_tests_drop(job.pk)
    job_rows.failed_tests_insert(job.pk, [vars(t) for t in report.failed_tests])
    if change.inserts and _sweeper_row_to_drop(dispatch):
        job_rows.never_started_drop(dispatch.pk)
    return job


def _report_fields(report: Report) -> dict:
    """The stored copy of a callback; a field of KEPT that the report leaves empty is None."""
    # The echoed upstream payload is ours already, and the callback_token is a credential: neither is kept.
    body = {k: v for k, v in report.body.items() if (k != "payload" or report.is_self_report) and k != "callback_token"}
    return {
        # A dispatch's job takes the dispatch's event type (job_rows.FROM_DISPATCH), never the
        # callback's: a PR head's job stored as `push` or `bisect` would vanish from its cells and gate.
        "event_type": (report.event_type or None) if report.is_self_report else None,
        "workflow_name": report.workflow_name,
        "conclusion": report.conclusion,
        "workflow_url": report.workflow_url or None,
        "artifact_url": report.artifact_url or None,
        "check_run_id": report.check_run_id or None,
        "job_id": report.job_id or None,
        "reported_started_at": report.started_at,
        "reported_completed_at": report.completed_at,
        "tests_passed": report.tests.get("passed"),
        "tests_failed": report.tests.get("failed"),
        "tests_skipped": report.tests.get("skipped"),
        "tests_total": report.tests.get("total"),
        "tests_error": report.tests.get("error"),
        "tests_xfailed": report.tests.get("xfailed"),
        "tests_xpassed": report.tests.get("xpassed"),
        "tests_accelerator_ran": report.tests.get("accelerator_ran"),
        "failed_tests_truncated": report.failed_tests_truncated,
        "environment": report.environment or None,
        "triage_verdict": report.triage_verdict or None,
        "body": body,
    }


# --- nightly / periodic self-reports ------------------------------------------------------------


def pr_head_only(sha: str) -> bool:
    """The relay knows `sha` as a PR head and not as a trunk commit (relay.stats.runkinds.on_trunk)."""
    if on_trunk(sha):
        return False
    known_head = pr_heads().filter(sha=sha).exists()
    return known_head or Dispatch.objects.filter(head_sha=sha, event_type="pull_request").exists()


def self_report_record(answer: Answer, token: VerifiedToken) -> str:
    """The tested upstream SHA is the top-level `pytorch_head_sha` when sent, else the delivery_id
    (the existing action's shape). The delivery_id stays the job's idempotency key, so every job
    of a Buildkite build (`buildkite-<build>-<job uuid>`) groups under its SHA and run id."""
    report = answer.report
    if report.status != JobRun.Status.COMPLETED:
        raise BadCallback(f"{report.event_type} callbacks must have status 'completed', got {report.status!r}")
    sha = report.pytorch_head_sha or report.delivery_key.lower()
    if not SHA_RE.match(sha):
        raise BadCallback(
            f"{report.event_type} callbacks must name the upstream commit tested: a 40-hex 'pytorch_head_sha', "
            f"or that SHA as 'delivery_id'; got pytorch_head_sha={report.pytorch_head_sha!r}, delivery_id={report.delivery_key!r}"
        )
    if pr_head_only(sha):
        raise Forbidden(
            f"{short_sha(sha)} is the head of an upstream PR, not a trunk commit: {report.event_type} results are for trunk "
            "commits; a PR head takes results only for its dispatch, with its callback_token"
        )
    if Delivery.objects.filter(guid=report.delivery_key).exists():
        # Its jobs' key would be a dispatch's, and its rows that dispatch's jobs.
        raise Forbidden(
            f"delivery_id {report.delivery_key} names an upstream delivery: {report.event_type} results are keyed by "
            "the SHA they tested or a key of their own; a delivery takes results only for its dispatch"
        )
    if not upstream.commit_exists(sha, fail_closed=report.event_type == "nightly"):
        raise BadCallback(f"{sha} is not a commit of the upstream repository")
    if report.delivery_key.lower() == sha:
        report.delivery_key = sha
    report.head_sha = sha
    return job_record(answer, token)
