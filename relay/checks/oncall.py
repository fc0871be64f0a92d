"""Oncall pings: when an L3/L4 backend's latest attempt fails on a PR's head, one comment per
(PR, downstream repo), marked `<!-- crcr-oncall:<repo> -->`, @-mentions the repo's oncalls with a
table of failing jobs and failed tests. A failure on a newer head edits it and pings again; when
the backend recovers, the comment says so. The unique OncallComment row holds GitHub's comment
id, so concurrent failures edit one comment instead of racing to post two."""

import logging

from django.conf import settings

from relay.github.markdown import md_code, md_link
from relay.github.writes import Plan, Skip, body_digest, tried_before, write_enqueue
from relay.policy.links import pr_path, public_url, short_sha
from relay.policy.verdicts import FAILING, PASSING
from relay.registry.allowlist import oncall_list

from ..github.upstream import upstream_installation_id
from ..models import OncallComment, Project, UpstreamWrite
from ..results import gate
from ..results.advice import advice_for
from ..results.heads import pr_head
from .checkruns import failed_test_line, fit_lines, job_details_url

logger = logging.getLogger(__name__)
COMMENT_LIMIT = 65536
TESTS_PER_JOB = 10
COMMENT_PAGES = 10


def comment_marker(repo: str) -> str:
    return f"<!-- crcr-oncall:{repo} -->"


def oncall_handles(project: Project) -> list[str]:
    """Project.oncalls as GitHub handles (a list, or one comma-separated string)."""
    return oncall_list(project.oncalls)


# --- deciding -------------------------------------------------------------------------------------


def head_outcome(project: Project, pr_number: int, head_sha: str) -> tuple[str, list]:
    """("failing", the failing verdicts the PR's verdict blames) | ("passing", []) once every job
    passed | ("open", []). A failure the verdict clears (already failing on trunk, muted, known,
    expected, flaky: relay.results.blame, the rule the gate enforces) pings nobody."""
    verdicts, cleared = gate.backend_jobs(project, pr_number, head_sha)
    verdicts = [v for v in verdicts if v.state != "superseded"]
    failing = [v for v in verdicts if v.state in FAILING and v.job.pk not in cleared]
    if failing:
        return "failing", failing
    if verdicts and all(v.state in PASSING for v in verdicts):
        return "passing", []
    return "open", []


def oncall_refresh(project: Project, pr_number: int) -> UpstreamWrite | None:
    """Enqueue a comment write when the PR head newly fails, or recovers after a ping."""
    if not oncall_handles(project):
        return None
    head = pr_head(pr_number)
    outcome, _ = head_outcome(project, pr_number, head)
    existing = OncallComment.objects.filter(pr_number=pr_number, project=project).first()
    if outcome == "failing":
        existing = existing or OncallComment.objects.get_or_create(pr_number=pr_number, project=project)[0]
    elif not (outcome == "passing" and existing is not None and existing.state == OncallComment.State.FAILING):
        return None
    kind = UpstreamWrite.Kind.COMMENT_UPDATE if existing.comment_id else UpstreamWrite.Kind.COMMENT_CREATE
    return write_enqueue(
        kind,
        f"comment:{existing.pk}",
        label=f"oncall comment for {project.full_name} on PR #{pr_number}",
        comment=existing,
    )


# --- the comment ----------------------------------------------------------------------------------


def failing_body(project: Project, pr_number: int, head: str, failing: list) -> str:
    repo = project.full_name
    # The registry's oncall handles are the only mentions the relay ever writes.
    mentions = " ".join(f"@{h}" for h in oncall_handles(project))
    lines = [
        comment_marker(repo),
        f"### ❌ CRCR downstream CI failure: {md_code(repo)}",
        "",
        f"{md_code(repo)} fails on `{short_sha(head)}` (the head of this PR). {mentions} please investigate.",
        "",
        "| Job | Result | Attempt | Failed tests |",
        "|---|---|---|---|",
    ]
    lines += [_job_row(v) for v in failing]
    lines += _advice_lines(failing, pr_number)
    lines += ["", f"Commit: `{head}` · [all results]({public_url(pr_path(pr_number))})"]
    return fit_lines(lines, COMMENT_LIMIT)


def _job_row(verdict) -> str:
    job = verdict.job
    name = f"{job.workflow_name} / {job.job_name}" if job.job_name else job.workflow_name
    linked = md_link(md_code(name, table=True), job_details_url(job))
    return f"| {linked} | {verdict.state.replace('_', ' ')} | {job.run_attempt} | {_tests_cell(job)} |"


def _advice_lines(failing: list, pr_number: int) -> list[str]:
    """Each failing job's triage verdict, marked advisory: the backend's analyser's opinion, which
    changes nothing above. Its text is code spans, and a suspect PR is `#N` in one too, so a
    verdict can neither mention anyone nor cross-reference another PR."""
    shown = [(v.job, advice) for v in failing if (advice := advice_for(v.job, pr_number))]
    if not shown:
        return []
    lines = ["", "**Triage verdicts** (advisory, from the backend's own analyser; they change no result):"]
    for job, advice in shown:
        name = f"{job.workflow_name} / {job.job_name}" if job.job_name else job.workflow_name
        line = f"- {md_code(name)}: {advice.headline} — {md_code(advice.summary, 500)}"
        if advice.suspect_pr or advice.suspect_commit:
            named = md_code(f"#{advice.suspect_pr}" if advice.suspect_pr else short_sha(advice.suspect_commit))
            line += f"; suspected upstream change {named} {advice.suspect_mark}".rstrip()
        if advice.analyzer_text:
            line += f" · by {md_code(advice.analyzer_text)}"
        lines.append(line)
    return lines


def _tests_cell(job) -> str:
    tests = list(job.failed_tests.all()[:TESTS_PER_JOB])
    if not tests and not job.tests_failed:
        return "—"
    names = "<br>".join(failed_test_line(t, table=True)[2:] for t in tests)
    count = f"{job.tests_failed} of {job.tests_total or '?'}" if job.tests_failed else f"{len(tests)}"
    more = "<br>…" if (job.tests_failed or 0) > len(tests) else ""
    return f"{count}: {names}{more}" if names else count


def recovered_body(project: Project, head: str, comment: OncallComment) -> str:
    repo = md_code(project.full_name)
    before = (
        f" (it failed on `{short_sha(comment.pinged_head_sha)}`)"
        if comment.pinged_head_sha and comment.pinged_head_sha != head
        else ""
    )
    return "\n".join(
        [
            comment_marker(project.full_name),
            f"### ✅ CRCR downstream CI recovered: {repo}",
            "",
            f"Every job of {repo} passes on `{short_sha(head)}`, the head of this PR{before}. Nothing to do.",
        ]
    )


# --- sending --------------------------------------------------------------------------------------


def comment_prepare(write: UpstreamWrite) -> Plan | Skip:
    """The outbox handler: the comment as the PR head says now; post once, then edit."""
    comment = OncallComment.objects.select_related("project").get(pk=write.comment_id)
    head = pr_head(comment.pr_number)
    outcome, failing = head_outcome(comment.project, comment.pr_number, head)
    if outcome == "failing":
        text, state = failing_body(comment.project, comment.pr_number, head, failing), OncallComment.State.FAILING
    elif outcome == "passing" and comment.state == OncallComment.State.FAILING:
        text, state = recovered_body(comment.project, head, comment), OncallComment.State.RECOVERED
    else:
        return Skip("nothing new to say")
    return _comment_plan(write, comment, text, state, head)


def _comment_plan(write: UpstreamWrite, comment: OncallComment, text: str, state: str, head: str) -> Plan | Skip:
    repo = settings.CRCR_UPSTREAM_REPO
    if comment.comment_id is None and tried_before(write):
        _adopt(comment)
    on_sent = _stored(comment, text, state, head)
    if comment.comment_id is None:
        return Plan(
            "POST",
            f"/repos/{repo}/issues/{comment.pr_number}/comments",
            upstream_installation_id(),
            {"body": text},
            on_sent=on_sent,
        )
    if body_digest(text) == comment.sent_digest:
        return Skip("unchanged")
    return Plan(
        "PATCH",
        f"/repos/{repo}/issues/comments/{comment.comment_id}",
        upstream_installation_id(),
        {"body": text},
        on_sent=on_sent,
    )


def _adopt(comment: OncallComment) -> None:
    """After a failed try, find a comment that try may have posted (by its marker) before
    posting again; only then does the relay search comments."""
    from ..github import client as github

    path = f"/repos/{settings.CRCR_UPSTREAM_REPO}/issues/{comment.pr_number}/comments?per_page=100"
    found = github.paginate(
        path, auth=f"token {github.installation_token(upstream_installation_id())}", max_pages=COMMENT_PAGES
    )
    mine = [c for c in found if comment_marker(comment.project.full_name) in (c.get("body") or "")]
    if mine:
        OncallComment.objects.filter(pk=comment.pk).update(comment_id=mine[0]["id"])
        comment.comment_id = mine[0]["id"]


def _stored(comment: OncallComment, text: str, state: str, head: str):
    def store(response) -> str:
        fields = {"sent_digest": body_digest(text), "state": state}
        if state == OncallComment.State.FAILING:
            fields["pinged_head_sha"] = head
        if comment.comment_id is None and isinstance(response.json, dict):
            fields["comment_id"] = response.json.get("id")
        OncallComment.objects.filter(pk=comment.pk).update(**fields)
        return f"comment {fields.get('comment_id') or comment.comment_id}: {state}"

    return store
