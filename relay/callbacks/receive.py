"""POST /github/callback: verify who is calling, bind the call to a dispatch the relay really
sent, and advance the job's state machine together with its stored results, atomically."""

import logging
import re
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from .. import follow_up
from ..github import upstream
from ..github.repo_ids import GitHubUnreachable
from ..models import Dispatch, JobRun, Level, Project, UpstreamCommit, UsedToken
from . import job_rows
from .body import BadCallback, Report, body_parse, report_read
from .identity import IdentityForbidden, project_for_token
from .oidc import KeyServerUnavailable, TokenRejected, VerifiedToken, bearer_token, token_verify
from .ratelimit import rate_limit_asked
from .tokens import InvalidCallbackToken, callback_token_read

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
        # While the limiter answers, the report is read and its dispatch looked up (one indexed
        # read, which a repo over its limit now costs too): that repo still hears 429, whatever
        # its report says and whatever the lookup raised.
        bound, refusal = _bound(project, body)
        decision = asked.decision()
    headers = {"X-RateLimit-Degraded": "true"} if decision.degraded else {}
    if not decision.allowed:
        return CallbackResult(
            429, {"detail": f"rate limit exceeded for {project.full_name}"}, {"Retry-After": str(decision.retry_after)}
        )
    if refusal is not None:
        raise refusal
    report, dispatch = bound
    if report.is_self_report:
        return _ok(self_report_record(project, report, token), headers)
    return _ok(job_record(project, dispatch, report, token), headers)


def _bound(project: Project, body: dict):
    """((the report, the dispatch it answers or None for a self-report), None), or (None, what
    was raised on the way: a refusal, or a database error), to be raised once the rate limit
    has had its say."""
    try:
        report = report_read(body)
        return (report, None if report.is_self_report else dispatch_for(project, report)), None
    except Exception as exc:  # noqa: BLE001 - raised by the caller after the 429 check
        return None, exc


# --- binding ----------------------------------------------------------------------------------------


def token_required(project: Project) -> bool:
    if project.require_callback_token is not None:
        return project.require_callback_token
    return project.level in (Level.L3, Level.L4)


def dispatch_for(project: Project, report: Report) -> Dispatch:
    """The dispatch this callback answers; its stored PR and head SHA are the truth, not the
    echoed payload."""
    dispatch = job_rows.dispatch_answered(report.delivery_id, project.pk)
    if dispatch is None:
        raise Forbidden(f"delivery {report.delivery_id} was never dispatched to {project.full_name}")
    if report.callback_token:
        _binding_check(project, report, dispatch)
    elif token_required(project):
        raise Forbidden(
            f"{project.full_name} must echo the callback_token of its dispatch (required at {project.level})"
        )
    return dispatch


def _binding_check(project: Project, report: Report, dispatch: Dispatch) -> None:
    try:
        binding = callback_token_read(report.callback_token)
    except InvalidCallbackToken as exc:
        raise Forbidden(str(exc)) from exc
    expected = (report.delivery_id, project.full_name.lower(), dispatch.pr_number, dispatch.head_sha)
    if (binding.delivery_guid, binding.repo, binding.pr_number, binding.head_sha) != expected:
        raise Forbidden("callback_token was issued for another delivery, repository, PR or head SHA")
    if report.pr_number not in (None, binding.pr_number) or report.head_sha not in ("", binding.head_sha):
        raise Forbidden("the echoed payload's PR or head SHA does not match the callback_token")


# --- the state machine ----------------------------------------------------------------------------


def job_record(project: Project, dispatch: Dispatch | None, report: Report, token: VerifiedToken) -> str:
    """Advance (delivery, repo, run, attempt, job) by one step. Exactly one of two identical
    concurrent callbacks wins; the other reads "duplicate"."""
    with transaction.atomic():
        outcome, job = _job_step(project, dispatch, report, token)
        if outcome != "duplicate":
            follow_up.job_recorded(job.pk, _recorded(project, job))
    return outcome


def _recorded(project: Project, job: JobRun) -> follow_up.RecordedJob:
    return follow_up.RecordedJob(project.level, job.event_type, job.pr_number, job.status, job.conclusion, job.ended_by)


def _job_step(project: Project, dispatch: Dispatch | None, report: Report, token: VerifiedToken):
    """(outcome, the job as written). The token's INSERT and the job's first statement are sent
    together (one round trip on PostgreSQL, with BEGIN): an in_progress report is usually a new
    row, so it tries the insert; a completion usually finds its row, so it locks it. The job's
    statement is undone when the token turns out to have carried this callback already."""
    key = _job_key(project, report)
    new_row = _job_fields(dispatch, report, key) if report.status == JobRun.Status.IN_PROGRESS else None
    used, first = _token_and_job_sent(token, report, project, new_row, key)
    if not _token_consumed(used, token, report, project):
        transaction.set_rollback(True)
        return "duplicate", None
    if new_row:
        pk = job_rows.inserted_id(first)
        if pk is not None:
            return report.status, _job_created(dispatch, report, pk, new_row)
        existing, has_failed_tests = job_rows.job_locked(key)
    else:
        existing, has_failed_tests = job_rows.job_locked_read(first)
        if existing is None:
            created = _job_create(dispatch, report, key)
            if created is not None:
                return report.status, created
            existing, has_failed_tests = job_rows.job_locked(key)
    return _job_advance(existing, report, has_failed_tests), existing


def _token_and_job_sent(token: VerifiedToken, report: Report, project: Project, new_row: dict | None, key: dict):
    """The token's INSERT and the job's first statement, sent together, both answers read: a
    cursor left unread (a replay refused, a statement failed) keeps SQLite from releasing the
    savepoint around them, which breaks an enclosing transaction."""
    with job_rows.batch():
        used = _token_send(token, report, project)
        with job_rows.closed_on_error(used):
            first = job_rows.job_insert_send(new_row) if new_row else job_rows.job_locked_send(key)
    with job_rows.closed_on_error(first):
        used.row()
    first.row()
    return used, first


def _job_key(project: Project, report: Report) -> dict:
    return {
        "delivery_key": report.delivery_id,
        "project_id": project.pk,
        "run_id": report.run_id,
        "run_attempt": report.run_attempt,
        "job_name": report.job_name,
    }


def _token_send(token: VerifiedToken, report: Report, project: Project) -> job_rows.Sent:
    now = timezone.now()
    expires = now + timedelta(seconds=max(60, int(token.claims["exp"]) - int(now.timestamp()) + 120))
    return job_rows.token_insert_send(token.issuer.url, _token_jti(token), expires, _token_use(report, project))


def _token_consumed(used: job_rows.Sent, token: VerifiedToken, report: Report, project: Project) -> bool:
    """False when this very token already carried this very callback (a safe retry). A nightly
    reporter may sign every job of one run with one token (vLLM's Buildkite reporter takes a single
    --oidc-token per build): there the token is bound to the run, and each job's delivery_id keeps
    the write idempotent."""
    if job_rows.inserted_id(used) is not None:
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


def _job_fields(dispatch: Dispatch | None, report: Report, key: dict) -> dict:
    """The columns of a new row for this report."""
    now = timezone.now()
    fields = {**key, **_report_fields(report), "dispatch_id": dispatch.pk if dispatch else None}
    fields.update(status=report.status, created_at=now, **_upstream_fields(dispatch, report))
    if report.status == JobRun.Status.IN_PROGRESS:
        fields.update(in_progress_at=now, queue_seconds=queue_seconds(dispatch, report, now))
    else:
        fields.update(completed_at=now, start_unknown=True)
    return fields


def _job_create(dispatch: Dispatch | None, report: Report, key: dict) -> JobRun | None:
    """The new row, or None when a concurrent callback created it first."""
    fields = _job_fields(dispatch, report, key)
    pk = job_rows.job_insert(fields)
    return None if pk is None else _job_created(dispatch, report, pk, fields)


def _job_created(dispatch: Dispatch | None, report: Report, pk: int, fields: dict) -> JobRun:
    """What goes with a row just inserted: its failed tests, and the end of the sweeper's
    stand-in row for its dispatch."""
    _failed_tests_store(pk, report)
    # A dispatch read elsewhere than `dispatch_answered` was not asked about the sweeper's row.
    if dispatch is not None and getattr(dispatch, "never_started_row", True):
        job_rows.never_started_drop(dispatch.pk)
    return JobRun(pk=pk, **{name: fields[name] for name in ("status", "conclusion", "event_type", "pr_number")})


def _job_advance(job: JobRun, report: Report, has_failed_tests: bool) -> str:
    if report.status == JobRun.Status.IN_PROGRESS:
        if job.status == JobRun.Status.IN_PROGRESS:
            return "duplicate"
        raise Conflict(
            f"job {report.job_name or report.workflow_name!r} attempt {report.run_attempt} already completed ({job.conclusion}); in_progress cannot follow completed"
        )
    if job.status == JobRun.Status.COMPLETED and not job.ended_by:
        if job.conclusion == report.conclusion:
            return "duplicate"
        raise Conflict(
            f"job already completed as {job.conclusion!r}; a second completion as {report.conclusion!r} contradicts it"
        )
    _job_complete(job, report, has_failed_tests)
    return "completed"


def _job_complete(job: JobRun, report: Report, has_failed_tests: bool) -> None:
    """in_progress → completed, or a real result replacing the sweeper's verdict."""
    now = timezone.now()
    fields = _report_fields(report, keep=job)
    fields.update(status=JobRun.Status.COMPLETED, ended_by="", completed_at=now)
    fields["execution_seconds"] = _seconds_between(job.in_progress_at, now)
    job_rows.job_update(job.pk, fields)
    for name in ("status", "conclusion", "ended_by", "event_type"):
        setattr(job, name, fields[name])
    if has_failed_tests:
        job_rows.failed_tests_drop(job.pk)
    _failed_tests_store(job.pk, report)


def _report_fields(report: Report, keep: JobRun | None = None) -> dict:
    """The stored copy of a callback; a completion keeps what in_progress said unless it says more."""
    # The echoed upstream payload is ours already, and the callback_token is a credential: neither is kept.
    body = {k: v for k, v in report.body.items() if (k != "payload" or report.is_self_report) and k != "callback_token"}
    fields = {
        "event_type": report.event_type or (keep.event_type if keep else "pull_request"),
        "workflow_name": report.workflow_name,
        "conclusion": report.conclusion,
        "workflow_url": report.workflow_url or (keep.workflow_url if keep else ""),
        "artifact_url": report.artifact_url or (keep.artifact_url if keep else ""),
        "check_run_id": report.check_run_id or (keep.check_run_id if keep else ""),
        "reported_started_at": report.started_at or (keep.reported_started_at if keep else None),
        "reported_completed_at": report.completed_at,
        "tests_passed": report.tests.get("passed"),
        "tests_failed": report.tests.get("failed"),
        "tests_skipped": report.tests.get("skipped"),
        "tests_total": report.tests.get("total"),
        "tests_error": report.tests.get("error"),
        "tests_xfailed": report.tests.get("xfailed"),
        "tests_xpassed": report.tests.get("xpassed"),
        "failed_tests_truncated": report.failed_tests_truncated,
        "environment": report.environment or (keep.environment if keep else {}),
        "triage_verdict": report.triage_verdict or (keep.triage_verdict if keep else None),
        "body": body,
    }
    return fields


def _upstream_fields(dispatch: Dispatch | None, report: Report) -> dict:
    if dispatch is not None:
        return {
            "pr_number": dispatch.pr_number,
            "head_sha": dispatch.head_sha,
            "event_type": report.event_type or dispatch.event_type,
        }
    return {"pr_number": None, "head_sha": report.head_sha}


def _failed_tests_store(job_id: int, report: Report) -> None:
    job_rows.failed_tests_insert(job_id, [vars(t) for t in report.failed_tests])


# --- timing -------------------------------------------------------------------------------------------


def queue_seconds(dispatch: Dispatch | None, report: Report, started) -> float | None:
    """Dispatch sent → in_progress, on the relay's clock. A re-run attempt is measured from its
    re-run request when we know it, and otherwise left empty rather than from the original
    dispatch (which could be days earlier)."""
    if dispatch is None:
        return None
    if report.run_attempt > 1:
        requested = upstream.rerun_requested_at(dispatch, report.run_id, report.run_attempt)
        return _seconds_between(requested, started)
    return _seconds_between(dispatch.sent_at, started)


def _seconds_between(start, end) -> float | None:
    if start is None or end is None:
        return None
    return round(max(0.0, (end - start).total_seconds()), 3)


# --- nightly / periodic self-reports ------------------------------------------------------------


def pr_head_only(sha: str) -> bool:
    """The relay knows `sha` as a PR head and not as a trunk commit."""
    if UpstreamCommit.objects.filter(sha=sha, is_trunk=True).exists():
        return False
    known_head = UpstreamCommit.objects.filter(sha=sha, pr_number__isnull=False).exists()
    return known_head or Dispatch.objects.filter(head_sha=sha, event_type="pull_request").exists()


def self_report_record(project: Project, report: Report, token: VerifiedToken) -> str:
    """The tested upstream SHA is the top-level `pytorch_head_sha` when sent, else the delivery_id
    (the existing action's shape). The delivery_id stays the job's idempotency key, so every job
    of a Buildkite build (`buildkite-<build>-<job uuid>`) groups under its SHA and run id."""
    if report.status != JobRun.Status.COMPLETED:
        raise BadCallback(f"{report.event_type} callbacks must have status 'completed', got {report.status!r}")
    sha = report.pytorch_head_sha or report.delivery_id.lower()
    if not SHA_RE.match(sha):
        raise BadCallback(
            f"{report.event_type} callbacks must name the upstream commit tested: a 40-hex 'pytorch_head_sha', "
            f"or that SHA as 'delivery_id'; got pytorch_head_sha={report.pytorch_head_sha!r}, delivery_id={report.delivery_id!r}"
        )
    if pr_head_only(sha):
        raise Forbidden(
            f"{sha[:12]} is the head of an upstream PR, not a trunk commit: {report.event_type} results are for trunk "
            "commits; a PR head takes results only for its dispatch, with its callback_token"
        )
    if not upstream.commit_exists(sha, fail_closed=report.event_type == "nightly"):
        raise BadCallback(f"{sha} is not a commit of the upstream repository")
    if report.delivery_id.lower() == sha:
        report.delivery_id = sha
    report.head_sha = sha
    return job_record(project, None, report, token)
