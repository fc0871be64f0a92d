"""Check runs on the upstream PR: one per downstream job (`crcr/<owner>/<repo>/<workflow>/<job>`,
the name today's tooling parses), one per backend from the moment of dispatch
(`crcr/<owner>/<repo>`, queued until its first job reports), and the merge gate (`crcr/gate`).

Each is a stored row keyed (head SHA, name). The first write creates it on GitHub and stores the
id; every later write PATCHes that id, with a body computed at send time from the recorded jobs."""

import logging
from urllib.parse import quote

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q

from relay.github.markdown import md_code, md_link, plain_line
from relay.github.writes import Plan, Skip, body_digest, tried_before, write_enqueue, write_in_flight, write_unsent
from relay.policy.links import pr_path, public_url, short_sha
from relay.policy.run_links import github_job_id, run_host_trusted
from relay.policy.verdicts import latest_attempt

from ..github.upstream import upstream_installation_id
from ..models import (
    NEVER_STARTED_RUN_ID,
    DemotionDecision,
    DemotionPullRequest,
    Dispatch,
    JobRun,
    Project,
    UpstreamCheckRun,
    UpstreamWrite,
)
from ..results import gate as gate_verdicts
from . import gate

logger = logging.getLogger(__name__)
Kind = UpstreamCheckRun.Kind
NAME_PREFIX = "crcr/"
TITLE_LIMIT = 255
SUMMARY_LIMIT = 65535
"""GitHub's caps on output.title and output.summary (characters)."""
FAILED_TESTS_LISTED = 200
GITHUB_CONCLUSIONS = {"action_required", "cancelled", "failure", "neutral", "success", "skipped", "timed_out"}
"""What an App may set (`stale` is GitHub's own)."""


# --- names and rows -------------------------------------------------------------------------------


def job_check_run_name(project: Project, workflow_name: str, job_name: str) -> str:
    """Plain text (relay.inputs.text.plain_line): the name is stored as it is sent."""
    return plain_line(f"{NAME_PREFIX}{project.full_name}/{workflow_name}/{job_name or workflow_name}")[:500]


def backend_check_run_name(project: Project) -> str:
    return f"{NAME_PREFIX}{project.full_name}"


def external_id(run_id: str, pr_number: int, repo: str) -> str:
    """`<run_id>:<pr>:<repo>`: fork PRs' check-run events carry no PR, so the id must."""
    return plain_line(f"{run_id}:{pr_number}:{repo}")


def check_run_ensure(kind: str, pr_number: int, head_sha: str, name: str, **fields) -> UpstreamCheckRun:
    row, created = UpstreamCheckRun.objects.get_or_create(
        head_sha=head_sha, name=name, defaults={"kind": kind, "pr_number": pr_number, **fields}
    )
    changed = {k: v for k, v in fields.items() if getattr(row, k) != v}
    if not created and changed:
        UpstreamCheckRun.objects.filter(pk=row.pk).update(**changed)
        row.refresh_from_db()
    return row


def check_run_refresh(row: UpstreamCheckRun) -> UpstreamWrite | None:
    """Enqueue a write when what the check run should show differs from what GitHub last got.
    A write to it still waiting to be sent answers for this change too: it computes its body when
    sent (`check_run_prepare`), after this change committed. So its body is not computed here as
    well: an L4 backend's every dispatch and job refreshes the gate, and each gate body reads
    every L4 backend's state (a fan-out to 27 L4 backends computed it 27 times, on the worker
    beside the sends: docs/performance.md, "Fan-out")."""
    unsent = write_unsent(f"check_run:{row.pk}")
    if unsent is not None:
        return unsent
    body = check_run_body(row)
    if body is None:
        return None
    if row.github_id and body_digest(body) == row.sent_digest and not write_in_flight(f"check_run:{row.pk}"):
        return None  # GitHub shows this already (and no older body is on its way to overwrite it)
    kind = UpstreamWrite.Kind.CHECK_RUN_UPDATE if row.github_id else UpstreamWrite.Kind.CHECK_RUN_CREATE
    return write_enqueue(
        kind,
        f"check_run:{row.pk}",
        label=f"{row.name} @ {short_sha(row.head_sha)} (PR #{row.pr_number})",
        check_run=row,
    )


def job_check_run_refresh(job: JobRun) -> UpstreamWrite | None:
    if job.run_id == NEVER_STARTED_RUN_ID:
        return None  # a dispatch nobody answered shows on the backend's check run
    name = job_check_run_name(job.project, job.workflow_name, job.job_name)
    if (
        job.ended_by == JobRun.EndedBy.SUPERSEDED
        and not UpstreamCheckRun.objects.filter(head_sha=job.head_sha, name=name).exists()
    ):
        return None  # never shown, and moot now
    if creation_suppressed(job.project, job.pr_number, job.head_sha, name):
        return None
    row = check_run_ensure(
        Kind.JOB,
        job.pr_number,
        job.head_sha,
        name,
        project=job.project,
        workflow_name=job.workflow_name,
        job_name=job.job_name,
        run_id=job.run_id,
        withdrawn=False,
    )
    return check_run_refresh(row)


def backend_check_run_refresh(project: Project, pr_number: int, head_sha: str) -> UpstreamWrite | None:
    if not gate_verdicts.head_dispatches(project, pr_number, head_sha).filter(state=Dispatch.State.SENT).exists():
        return None
    if creation_suppressed(project, pr_number, head_sha, backend_check_run_name(project)):
        return None
    row = check_run_ensure(
        Kind.BACKEND, pr_number, head_sha, backend_check_run_name(project), project=project, withdrawn=False
    )
    return check_run_refresh(row)


def creation_suppressed(project: Project, pr_number: int, head_sha: str, name: str) -> bool:
    """While the repo's demotion PR is open (relay.levels.demotion) no new check run is created
    for it; one the relay already decided to create is still sent, updated and finished."""
    demotion_pr = check_runs_suppressed(project)
    if demotion_pr is None or UpstreamCheckRun.objects.filter(head_sha=head_sha, name=name).exists():
        return False
    suppression_record(demotion_pr, pr_number)
    return True


def gate_check_run_refresh(pr_number: int, head_sha: str) -> UpstreamWrite | None:
    return check_run_refresh(check_run_ensure(Kind.GATE, pr_number, head_sha, gate_verdicts.GATE_NAME))


# --- bodies ---------------------------------------------------------------------------------------


def check_run_body(row: UpstreamCheckRun) -> dict | None:
    """What GitHub should show now (a PATCH body: no head_sha); None when there is nothing yet."""
    if row.kind == Kind.GATE:
        body = gate.gate_body(row.pr_number, row.head_sha)
    elif row.kind == Kind.BACKEND:
        body = _backend_body(row)
    else:
        body = _job_body(row)
    return {"name": row.name, **body} if body is not None else None


def _withdrawn(row: UpstreamCheckRun) -> dict:
    label = f"ciflow/crcr/{row.project.device}" if row.project and row.project.device else "the ciflow/crcr label"
    summary = f"{md_code(label)} was removed from this PR, so this backend no longer reports here. Add the label again to show its results."
    return {
        "status": "completed",
        "conclusion": "neutral",
        "output": {"title": f"Not reported: {label} removed", "summary": summary},
    }


def _backend_body(row: UpstreamCheckRun) -> dict | None:
    dispatch = (
        gate_verdicts.head_dispatches(row.project, row.pr_number, row.head_sha)
        .filter(state=Dispatch.State.SENT)
        .order_by("-sent_at", "-id")
        .first()
    )
    if dispatch is None:
        return None
    common = {
        "details_url": hud_pr_url(row.pr_number),
        "external_id": external_id("-", row.pr_number, row.project.full_name),
    }
    if row.withdrawn:
        return {**common, **_withdrawn(row)}
    return {**common, **_backend_status(row, dispatch)}


def _backend_status(row: UpstreamCheckRun, dispatch: Dispatch) -> dict:
    jobs = JobRun.objects.filter(dispatch=dispatch)
    repo = md_code(row.project.full_name)
    started = jobs.exclude(run_id=NEVER_STARTED_RUN_ID).count()
    silent = jobs.filter(run_id=NEVER_STARTED_RUN_ID).first()
    if started:
        summary = f"{repo} started: its {started} job(s) report in their own {md_code(f'crcr/{row.project.full_name}/…')} check runs."
        return {"status": "completed", "conclusion": "neutral", "output": {"title": "Started", "summary": summary}}
    if silent is not None and silent.ended_by == JobRun.EndedBy.SUPERSEDED:
        return {
            "status": "completed",
            "conclusion": "neutral",
            "output": {
                "title": "Superseded by a newer head",
                "summary": f"{repo} was asked to test a newer head of this PR.",
            },
        }
    if silent is not None:
        hours = settings.CRCR_NEVER_STARTED_HOURS
        summary = f"{repo} was dispatched at {_iso(dispatch.sent_at)} and no job reported within {hours:g} h."
        return {
            "status": "completed",
            "conclusion": "timed_out",
            "output": {"title": "Never started", "summary": summary},
        }
    summary = f"{repo} was dispatched at {_iso(dispatch.sent_at)}; waiting for its first job to report."
    return {"status": "queued", "output": {"title": "Dispatched, waiting for the first job", "summary": summary}}


def job_latest(row: UpstreamCheckRun) -> JobRun | None:
    jobs = JobRun.objects.filter(
        project=row.project, head_sha=row.head_sha, workflow_name=row.workflow_name, job_name=row.job_name
    )
    attempts = list(jobs.exclude(run_id=NEVER_STARTED_RUN_ID))
    return latest_attempt(attempts) if attempts else None


def _job_body(row: UpstreamCheckRun) -> dict | None:
    job = job_latest(row)
    if job is None:
        return None
    body = {
        "details_url": job_details_url(job) or hud_pr_url(row.pr_number),
        "external_id": external_id(job.run_id, row.pr_number, row.project.full_name),
    }
    started = job.reported_started_at or job.in_progress_at
    if started:
        body["started_at"] = _iso(started)
    if row.withdrawn:
        return {**body, **_withdrawn(row)}
    status, conclusion, title = _job_outcome(job)
    body.update(status=status, output={"title": title[:TITLE_LIMIT], "summary": job_summary(job)})
    if conclusion:
        body.update(conclusion=conclusion, completed_at=_iso(job.reported_completed_at or job.completed_at))
    return body


def _job_outcome(job: JobRun) -> tuple[str, str | None, str]:
    if job.status != JobRun.Status.COMPLETED:
        return "in_progress", None, "Running" + (f" (attempt {job.run_attempt})" if job.run_attempt > 1 else "")
    if job.ended_by == JobRun.EndedBy.SUPERSEDED:
        # neutral, not cancelled: bots that ping on cancelled must not ping for a moot head.
        return "completed", "neutral", "Superseded by a newer head"
    if job.ended_by == JobRun.EndedBy.TIMED_OUT:
        return "completed", "timed_out", f"Timed out: no completion within {settings.CRCR_JOB_TIMEOUT_HOURS:g} h"
    conclusion = (
        job.conclusion
        if job.conclusion in GITHUB_CONCLUSIONS
        else ("timed_out" if job.conclusion == "stale" else "neutral")
    )
    return "completed", conclusion, _result_title(job, conclusion)


def _result_title(job: JobRun, conclusion: str) -> str:
    label = conclusion.replace("_", " ").capitalize()
    if job.tests_failed:
        return f"{label}: {job.tests_failed} of {job.tests_total or '?'} tests failed"
    if job.tests_total:
        return f"{label}: {job.tests_passed or 0} of {job.tests_total} tests passed"
    return label


def job_summary(job: JobRun, limit: int = SUMMARY_LIMIT) -> str:
    """Markdown: where the job ran, its test counts and failed tests, within GitHub's cap. Every
    reported string is a code span (relay.github.markdown)."""
    run = md_link(md_code(job.run_id), run_url_trusted(job))
    lines = [
        f"**{md_code(job.project.full_name)}** · workflow {md_code(job.workflow_name)} · job {md_code(job.job_name or job.workflow_name)} · run {run}, attempt {job.run_attempt}"
    ]
    if job.tests_total is not None:
        lines += [
            "",
            "| Passed | Failed | Skipped | Total |",
            "|---:|---:|---:|---:|",
            f"| {job.tests_passed or 0} | {job.tests_failed or 0} | {job.tests_skipped or 0} | {job.tests_total} |",
        ]
    failed = list(job.failed_tests.all()[: FAILED_TESTS_LISTED + 1])
    if failed:
        lines += [
            "",
            f"**Failed tests** ({job.tests_failed or len(failed)}{', list truncated by the reporter' if job.failed_tests_truncated else ''}):",
        ]
        lines += [failed_test_line(t) for t in failed[:FAILED_TESTS_LISTED]]
    return fit_lines(lines, limit)


def failed_test_line(test, *, table: bool = False) -> str:
    name = f"{test.classname}.{test.name}" if test.classname else test.name
    message = (test.message or "").strip().splitlines()[0] if (test.message or "").strip() else ""
    message = md_code(message, 200, table=table)
    return f"- {md_code(name, 300, table=table)}" + (f": {message}" if message else "")


def fit_lines(lines: list[str], limit: int) -> str:
    """Join lines, dropping the tail (with a note) rather than cutting one in half."""
    out, size = [], 0
    for index, line in enumerate(lines):
        if size + len(line) + 1 > limit - 40:
            out.append(f"… {len(lines) - index} more line(s) not shown")
            break
        out.append(line)
        size += len(line) + 1
    return "\n".join(out)[:limit]


def job_details_url(job: JobRun) -> str:
    """The job's own page: `<workflow_url>/job/<check_run_id>` when the id is GitHub's numeric one;
    "" when the reported run is not on a host the project's CI provider owns (relay.policy.run_links):
    GitHub's Details button and our comments never send reviewers to an arbitrary site."""
    url = run_url_trusted(job)
    job_id = github_job_id(job)
    if url and job_id:
        return f"{url.rstrip('/')}/job/{job_id}"
    return url


def run_url_trusted(job: JobRun) -> str:
    return job.workflow_url if run_host_trusted(job.workflow_url, job.project.ci_provider) else ""


def hud_pr_url(pr_number: int) -> str:
    return public_url(pr_path(pr_number))


def _iso(moment) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else ""


# --- sending --------------------------------------------------------------------------------------


def check_run_prepare(write: UpstreamWrite) -> Plan | Skip:
    """The outbox handler: create once, then PATCH the stored id; unchanged bodies are skipped."""
    row = UpstreamCheckRun.objects.select_related("project").get(pk=write.check_run_id)
    body = check_run_body(row)
    if body is None:
        return Skip("nothing recorded to show yet")
    repo = settings.CRCR_UPSTREAM_REPO
    if row.github_id is None and tried_before(write):
        _adopt(row)  # an earlier try may have created it before the connection broke
    if row.github_id is None:
        if row.withdrawn:
            return Skip("label removed before the check run was created")
        return Plan(
            "POST",
            f"/repos/{repo}/check-runs",
            upstream_installation_id(),
            {**body, "head_sha": row.head_sha},
            on_sent=_stored(row, body),
        )
    if body_digest(body) == row.sent_digest:
        return Skip("unchanged")
    return Plan(
        "PATCH",
        f"/repos/{repo}/check-runs/{row.github_id}",
        upstream_installation_id(),
        body,
        on_sent=_stored(row, body),
    )


def _adopt(row: UpstreamCheckRun) -> None:
    from ..github import client as github

    path = f"/repos/{settings.CRCR_UPSTREAM_REPO}/commits/{row.head_sha}/check-runs?check_name={quote(row.name, safe='')}&filter=latest"
    found = github.as_installation(upstream_installation_id(), "GET", path).json or {}
    ours = [
        r for r in found.get("check_runs", []) if str((r.get("app") or {}).get("id")) == str(settings.GITHUB_APP_ID)
    ]
    if ours:
        UpstreamCheckRun.objects.filter(pk=row.pk).update(
            github_id=ours[0]["id"], check_suite_id=(ours[0].get("check_suite") or {}).get("id")
        )
        row.github_id = ours[0]["id"]


def _stored(row: UpstreamCheckRun, body: dict):
    def store(response) -> str:
        data = response.json if isinstance(response.json, dict) else {}
        fields = {
            "sent_digest": body_digest(body),
            "last_status": body.get("status", ""),
            "last_conclusion": body.get("conclusion", ""),
        }
        if row.github_id is None and data.get("id"):
            fields.update(github_id=data["id"], check_suite_id=(data.get("check_suite") or {}).get("id"))
        UpstreamCheckRun.objects.filter(pk=row.pk).update(**fields)
        return f"check run {data.get('id', row.github_id)}: {fields['last_status']} {fields['last_conclusion']}".strip()

    return store


def open_check_runs(pr_number: int, project: Project):
    """The backend's check runs on this PR that have not (as far as GitHub was told) completed."""
    rows = UpstreamCheckRun.objects.filter(pr_number=pr_number, project=project, kind__in=[Kind.BACKEND, Kind.JOB])
    return rows.filter(~Q(last_status="completed") | Q(github_id__isnull=True))


# --- while a demotion PR is open (relay.levels.demotion opens it) ---------------------------------


def check_runs_suppressed(project: Project) -> DemotionPullRequest | None:
    """The open demotion PR that stops new check runs for this L3 repo, or None."""
    if project.level not in DemotionPullRequest.DEMOTED_LEVELS:
        return None
    return DemotionPullRequest.objects.filter(
        project=project, state=DemotionPullRequest.State.OPEN, number__isnull=False
    ).first()


def suppression_record(row: DemotionPullRequest, pr_number: int) -> None:
    """Audit once per (demotion PR, upstream PR): the unique constraint drops repeats."""
    try:
        with transaction.atomic():
            DemotionDecision.objects.create(
                project_id=row.project_id,
                demotion_pr=row,
                kind=DemotionDecision.Kind.SUPPRESSED,
                decided_by=DemotionPullRequest.DECIDED_BY,
                upstream_pr=pr_number,
                note=f"no new check runs on PR #{pr_number} while demotion PR #{row.number} is open",
            )
    except IntegrityError:
        pass
