"""Issues filed in a backend's own repository for the failure causes that matter (opt-in per
backend, relay.models.CauseIssuePolicy), through the App and the outbox like every other write.

Once a minute, after the causes are clustered (relay/teststore/tasks.py), each opted-in backend's
causes are measured over its window (relay.results.causes.backend_impacts): one that fails on
enough trunk commits or tests opens an issue (or reopens its closed one), unless the reference
fails through the same reason (`upstreams`: upstream's bug, not the backend's); an open one is updated
when it grows (more tests or trunk commits); it closes only after it has stayed off trunk for
`close_after_days` days in a row, a lower threshold than the one that opened it, so an issue does
not flap. The issue's text is computed when the write is sent, from the row as it is then; every
piece of it that comes from a report is an inline code span (relay.github.markdown), so no
@-mention, link or HTML in a failure message reaches GitHub live."""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from relay.github.markdown import md_code, md_link
from relay.github.writes import Plan, Skip, tried_before, write_enqueue
from relay.results.causes import backend_cause_tests, backend_impacts

from ..github.installations import installation_id_for
from ..models import CauseIssue, CauseIssuePolicy, FailureCause, UpstreamWrite

logger = logging.getLogger(__name__)
OFF_TRUNK_DAYS = 1
"""A cause with no trunk failure in the last day is below the lower threshold."""
TESTS_LISTED = 30
TITLE_PREFIX = "[CRCR] "


def days(n: int) -> timedelta:
    """`n` days of the thresholds (settings.CRCR_CAUSE_ISSUE_DAY_SECONDS: two minutes in the sandbox)."""
    return timedelta(seconds=n * settings.CRCR_CAUSE_ISSUE_DAY_SECONDS)


def days_said(n: int) -> str:
    if settings.CRCR_CAUSE_ISSUE_DAY_SECONDS == 86400:
        return f"{n} days"
    return f"{n} days (a day here lasts {settings.CRCR_CAUSE_ISSUE_DAY_SECONDS:g} s)"


# --- deciding ------------------------------------------------------------------------------------------


def cause_issues_sweep(now=None) -> int:
    """Every opted-in backend's issues brought to what its causes say. Returns writes intended."""
    now = now or timezone.now()
    intended = 0
    for policy in CauseIssuePolicy.objects.filter(enabled=True, project__active=True).select_related("project"):
        try:
            intended += backend_issues_step(policy, now)
        except Exception:  # noqa: BLE001 - one backend's trouble must not stall the others
            logger.exception("cause issues of %s could not be decided", policy.project.full_name)
    return intended


def backend_issues_step(policy: CauseIssuePolicy, now) -> int:
    """One backend: open what crossed, update what grew, close what stayed off trunk long enough."""
    project, since = policy.project, now - days(policy.window_days)
    impacts = backend_impacts(project, since)
    on_trunk_lately = {
        cid for cid, i in backend_impacts(project, now - days(OFF_TRUNK_DAYS)).items() if i.trunk_commits
    }
    causes = FailureCause.objects.in_bulk(list(impacts))
    issues = {issue.rule: issue for issue in CauseIssue.objects.filter(project=project)}
    changed: dict[str, CauseIssue] = {}
    for cause_id, impact in impacts.items():
        cause, issue = causes[cause_id], issues.get(causes[cause_id].rule)
        if issue is not None and cause_id in on_trunk_lately:
            issue.below_since = None
        if (_opens(policy, issue, impact, since) and not upstreams(cause, impact)) or _grew(issue, impact):
            changed[cause.rule] = issues[cause.rule] = _counted(issue or _new(project, cause, now), cause, impact, now)
    for issue in issues.values():
        if issue.state == CauseIssue.State.OPEN and _closes(issue, on_trunk_lately, now, policy):
            changed[issue.rule] = issue
    with transaction.atomic():
        for issue in issues.values():
            issue.save()
        for issue in changed.values():
            write_enqueue(UpstreamWrite.Kind.CAUSE_ISSUE, f"cause-issue:{issue.pk}", issue_title(issue))
    return len(changed)


def crosses(policy: CauseIssuePolicy, impact) -> bool:
    return impact.trunk_commits >= policy.open_trunk_commits or impact.tests >= policy.open_tests


def upstreams(cause: FailureCause, impact) -> bool:
    """A reason the reference fails through too is upstream's bug, not this backend's: no issue is
    opened for it in the backend's repository (every opted-in backend would get the same one, and
    none can fix it there); the cause page suggests it as an upstream known issue instead. A
    missing operator stays the backend's to implement, whatever the reference lacks."""
    return impact.reference_tests > 0 and cause.kind != FailureCause.Kind.MISSING_OPERATOR


def _opens(policy: CauseIssuePolicy, issue: CauseIssue | None, impact, since) -> bool:
    """A cause without an open issue opens one when it crosses the threshold; a closed issue's
    cause must cross it again on failures after the close (the window still holds the old ones)."""
    if issue is not None and issue.state == CauseIssue.State.OPEN:
        return False
    if not crosses(policy, impact):
        return False
    if issue is None:
        return True
    again = backend_impacts(issue.project, max(since, issue.closed_at or since)).get(impact.cause_id)
    return again is not None and crosses(policy, again)


def _grew(issue: CauseIssue | None, impact) -> bool:
    return (
        issue is not None
        and issue.state == CauseIssue.State.OPEN
        and (impact.tests > issue.tests or impact.trunk_commits > issue.trunk_commits)
    )


def _new(project, cause, now) -> CauseIssue:
    return CauseIssue(project=project, rule=cause.rule, opened_at=now)


def _counted(issue: CauseIssue, cause, impact, now) -> CauseIssue:
    """The issue (re)opened with the cause's counts as they are now."""
    if issue.state == CauseIssue.State.CLOSED:
        issue.state, issue.closed_at, issue.opened_at, issue.first_sha = CauseIssue.State.OPEN, None, now, ""
    issue.cause, issue.label, issue.below_since = cause, cause.label[:520], None
    issue.tests, issue.trunk_commits, issue.reference_tests = impact.tests, impact.trunk_commits, impact.reference_tests
    issue.first_sha = issue.first_sha or impact.first_trunk_sha
    return issue


def _closes(issue: CauseIssue, on_trunk_lately: set[int], now, policy) -> bool:
    """Off trunk since when; closed once that has lasted `close_after_days`."""
    if issue.cause_id in on_trunk_lately:
        return False
    issue.below_since = issue.below_since or now
    if now - issue.below_since < days(policy.close_after_days):
        return False
    issue.state, issue.closed_at = CauseIssue.State.CLOSED, now
    return True


# --- sending -------------------------------------------------------------------------------------------


def cause_issue_prepare(write: UpstreamWrite) -> Plan | Skip:
    """Open the issue (POST), or bring its title, text and state up to date (PATCH)."""
    issue = CauseIssue.objects.select_related("project", "cause").get(pk=int(write.target_key.split(":", 1)[1]))
    repo = issue.project.full_name
    body = {"title": issue_title(issue), "body": issue_text(issue)}
    if issue.number is None and tried_before(write):
        _adopt(issue)
    if issue.number is None:
        if issue.state == CauseIssue.State.CLOSED:
            return Skip("closed before it was ever opened")
        return Plan("POST", f"/repos/{repo}/issues", installation_id_for(repo), body, on_sent=_numbered(issue))
    body["state"] = issue.state
    if issue.state == CauseIssue.State.CLOSED:
        body["state_reason"] = "completed"
    path = f"/repos/{repo}/issues/{issue.number}"
    return Plan(
        "PATCH", path, installation_id_for(repo), body, on_sent=lambda r: f"{repo}#{issue.number} {issue.state}"
    )


def marker(issue: CauseIssue) -> str:
    """Hidden in the issue's text: how a retry finds the issue an earlier try opened."""
    return f"<!-- crcr-cause-issue:{issue.pk} -->"


def _adopt(issue: CauseIssue) -> None:
    """After a try whose answer was lost, the issue it may have opened (by its marker), before
    opening another; only then does the relay list the repository's issues."""
    from ..github import client as github

    repo = issue.project.full_name
    token = github.installation_token(installation_id_for(repo))
    found = github.paginate(f"/repos/{repo}/issues?state=all&per_page=100", auth=f"token {token}", max_pages=5)
    mine = [i for i in found if marker(issue) in (i.get("body") or "")]
    if mine:
        CauseIssue.objects.filter(pk=issue.pk).update(number=mine[0]["number"], html_url=mine[0].get("html_url", ""))
        issue.number = mine[0]["number"]


def _numbered(issue: CauseIssue):
    def stored(response) -> str:
        data = response.json if isinstance(response.json, dict) else {}
        CauseIssue.objects.filter(pk=issue.pk).update(
            number=data.get("number"), html_url=data.get("html_url", "")[:500]
        )
        return f"{issue.project.full_name}#{data.get('number')} opened"

    return stored


def issue_title(issue: CauseIssue) -> str:
    """Plain text, one line; an @ is written as the full-width sign, which GitHub never reads as
    a mention (titles do not ping, but a title is also quoted in notifications)."""
    return (TITLE_PREFIX + issue.label).replace("@", "\uff20")[:250]


def _reference_line(issue: CauseIssue) -> str:
    if not issue.reference_tests:
        return "not failing through it: this backend's own"
    if issue.cause is not None and issue.cause.kind == FailureCause.Kind.MISSING_OPERATOR:
        return f"lacks it too ({issue.reference_tests} tests): the operator is this backend's to implement all the same"
    # Only an issue opened before the reference shared its cause (`upstreams` opens none after).
    return (
        f"fails through it too now ({issue.reference_tests} tests): likely upstream's, not this backend's; "
        "it closes itself once off trunk"
    )


def issue_text(issue: CauseIssue) -> str:
    policy = CauseIssuePolicy.objects.filter(project=issue.project).first() or CauseIssuePolicy()
    window = timezone.now() - days(policy.window_days)
    tests = backend_cause_tests(issue.project, issue.cause_id, window, TESTS_LISTED) if issue.cause_id else []
    hud = f"{settings.CRCR_PUBLIC_URL}/causes/{issue.cause_id}" if issue.cause_id else settings.CRCR_PUBLIC_URL
    reference = _reference_line(issue)
    first = md_code(issue.first_sha[:12]) if issue.first_sha else "none yet (only PR commits so far)"
    lines = [
        f"The CRCR HUD clustered this backend's failures; one cause crossed its threshold ({policy.open_trunk_commits}"
        f" trunk commits or {policy.open_tests} tests within {days_said(policy.window_days)}).",
        "",
        f"- **Cause:** {md_code(issue.rule, 500)}",
        f"- **Now:** {issue.tests} tests on {issue.trunk_commits} trunk commits in the last {days_said(policy.window_days)}",
        f"- **First failing trunk commit:** {first}",
        f"- **The reference (OpenReg):** {reference}",
        f"- **On the HUD:** {md_link('the cause, its tests, commits and trend', hud)}",
        "",
        "**Tests:**",
        *[f"- {md_code(test, 300)}" for test in tests],
        "",
    ]
    if issue.state == CauseIssue.State.CLOSED:
        lines.append(f"Closed: not failing on trunk for {days_said(policy.close_after_days)}.")
    else:
        lines.append(
            f"This issue closes itself once the cause stays off trunk for {days_said(policy.close_after_days)}."
        )
    return "\n".join([*lines, marker(issue)])
