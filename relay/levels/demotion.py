"""The demotion loop, upstream's "demotion as a closed loop" (reference/upstream-changes.md): when an
L3 repo misses the demotion criteria, a bot pull request `[CRCR] Demote <repo> from L3 to L2` on
branch `crcr-demotion/<repo>` moves its allowlist entry down; later decisions refresh it, close it
when the repo is back within target, and open a new one after a person closed it while the repo
still misses. Merging stays a person's call; a repo with no jobs in the window never gets one.

Deciding is here and writes rows only: `demotion_decide` takes one repo's level-status entry
(upstream's shape, computed by the level loop's beat task, relay.levels.tasks) and sets what the relay wants; a
DEMOTION_SYNC upstream write (relay.levels.demotion_sync, sent by the outbox engine with its
retries and backoff) makes GitHub agree. Every decision leaves a DemotionDecision row.

While a demotion PR is open the relay creates no new check runs for that repo's jobs
(`check_runs_suppressed`, asked by relay.checks.checkruns); those created before still finish."""

import hashlib
import json
import logging
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from relay.github.markdown import md_code, md_link
from relay.github.writes import write_enqueue
from relay.policy.links import short_sha
from relay.registry.allowlist import LEVEL_BELOW, oncall_list

from ..models import DemotionDecision, DemotionPullRequest, Project, UpstreamWrite

logger = logging.getLogger(__name__)
Decision, State = DemotionDecision.Kind, DemotionPullRequest.State
LABEL = "crcr-auto-demotion"
EXCUSED_LISTED = 30
AT_LEAST = {"pass_rate", "tenure_days", "data_days"}
"""Criteria whose target is a minimum; the rest are maxima (reference/upstream-changes.md)."""


def demotion_branch(project: Project) -> str:
    return f"crcr-demotion/{project.full_name}"


def demotion_title(row: DemotionPullRequest) -> str:
    return f"[CRCR] Demote {row.project.full_name} from {row.from_level} to {row.to_level}"


# --- reading --------------------------------------------------------------------------------------


def demotion_pr_active(project: Project) -> DemotionPullRequest | None:
    return DemotionPullRequest.objects.filter(project=project, state__in=DemotionPullRequest.ACTIVE_STATES).first()


def demotion_pr_summary(project: Project) -> dict | None:
    """The active demotion PR as the level-status API and the backend page show it, or None."""
    row = demotion_pr_active(project)
    if row is None:
        return None
    return {"number": row.number, "url": row.html_url or None, "state": row.state, "branch": row.branch}


# --- deciding -------------------------------------------------------------------------------------


def demotion_decide(project_id: int, status: dict) -> DemotionDecision | None:
    """What one repo's level-status entry ({repo, level, change, noData, criteria, passRate, ...})
    means for its demotion PR; the decision recorded, or None when nothing changed. Safe to call
    again with the same entry: the row's state is re-read under a lock and every move is a
    conditional UPDATE, so two deciders cannot open two PRs (the unique constraint backs it)."""
    with transaction.atomic():
        project = Project.objects.select_for_update().get(pk=project_id)
        active = demotion_pr_active(project)
        misses = status.get("change") == "demote"
        if active is not None and project.level != active.from_level:
            return _moot(active, f"the registry has it at {project.level} now", status)
        if project.level not in DemotionPullRequest.DEMOTED_LEVELS:
            note = f"{project.level} is not demoted by the loop (upstream demotes L3 to L2); a person decides"
            return _once(project, Decision.SKIPPED_LEVEL, note, status) if misses else None
        if status.get("noData"):
            return _once(project, Decision.SKIPPED_NO_DATA, "no jobs in the window: listed, never demoted", status)
        if misses:
            return _refreshed(active, status) if active else _opened(project, status)
        return _recovered(active, status) if active and active.state == State.OPEN else None


def _opened(project: Project, status: dict) -> DemotionDecision | None:
    latest = project.demotion_prs.first()
    if latest is not None and latest.state == State.MERGED and project.level == latest.from_level:
        return None  # merged upstream; the registry follows when the allowlist is imported
    kind = Decision.REOPENED if latest is not None and latest.state == State.CLOSED_BY_HAND else Decision.OPENED
    try:
        with transaction.atomic():
            row = DemotionPullRequest.objects.create(
                project=project,
                from_level=project.level,
                to_level=LEVEL_BELOW[project.level],
                branch=demotion_branch(project),
                evidence=status,
                replaces=latest if kind == Decision.REOPENED else None,
            )
    except IntegrityError:
        return None  # another decider opened it a moment ago
    sync_enqueue(row)
    return decision_record(row, kind, f"misses {', '.join(missed_names(status))}", status)


def _refreshed(row: DemotionPullRequest, status: dict) -> DemotionDecision | None:
    """Still missing: the body follows the numbers; the audit notes a change of what is missed
    (or a close that is called off), not every new measurement."""
    was = row.state
    changed = missed_names(row.evidence) != missed_names(status)
    if not DemotionPullRequest.objects.filter(pk=row.pk, state=was).update(state=State.OPEN, evidence=status, steps=0):
        return None
    row.state, row.evidence = State.OPEN, status
    sync_enqueue(row)
    if was == State.CLOSING:
        return decision_record(row, Decision.REFRESHED, "misses again before the close went through: kept open", status)
    if changed:
        return decision_record(row, Decision.REFRESHED, f"now misses {', '.join(missed_names(status))}", status)
    return None


def _recovered(row: DemotionPullRequest, status: dict) -> DemotionDecision | None:
    if not DemotionPullRequest.objects.filter(pk=row.pk, state=State.OPEN).update(
        state=State.CLOSING, evidence=status, steps=0
    ):
        return None
    row.state, row.evidence = State.CLOSING, status
    sync_enqueue(row)
    return decision_record(row, Decision.CLOSED_RECOVERED, "every demotion criterion is met again", status)


def _moot(row: DemotionPullRequest, note: str, status: dict) -> DemotionDecision | None:
    if not DemotionPullRequest.objects.filter(pk=row.pk, state=State.OPEN).update(state=State.CLOSING, steps=0):
        return None
    row.state = State.CLOSING
    sync_enqueue(row)
    return decision_record(row, Decision.CLOSED_MOOT, note, status)


def _once(project: Project, kind: str, note: str, status: dict) -> DemotionDecision | None:
    """A standing skip is recorded when it starts, not on every run."""
    latest = project.demotion_decisions.exclude(kind=Decision.SUPPRESSED).first()
    if latest is not None and latest.kind == kind:
        return None
    return DemotionDecision.objects.create(
        project=project,
        kind=kind,
        decided_by=DemotionPullRequest.DECIDED_BY,
        note=note,
        evidence=_audit_evidence(status),
    )


def decision_record(
    row: DemotionPullRequest, kind: str, note: str, status: dict | None = None, by: str = DemotionPullRequest.DECIDED_BY
):
    return DemotionDecision.objects.create(
        project_id=row.project_id,
        demotion_pr=row,
        kind=kind,
        decided_by=by,
        note=note[:2000],
        evidence=_audit_evidence(status if status is not None else row.evidence),
    )


def _audit_evidence(status: dict) -> dict:
    """What the decision rested on: the criteria and both pass rates (the excused jobs by count
    and their first evidence links; the full list stays on the PR row)."""
    rates = dict(status.get("passRate") or {})
    excused = rates.pop("excused", None) or []
    return {
        "criteria": status.get("criteria") or [],
        "passRate": {**rates, "excusedJobs": len(excused), "excused": excused[:10]},
        "noData": bool(status.get("noData")),
        "windowDays": status.get("windowDays"),
    }


def sync_enqueue(row: DemotionPullRequest) -> UpstreamWrite:
    """Intend one sync of the row with GitHub (kicked after commit; a newer one supersedes it)."""
    label = f"demotion PR for {row.project.full_name} ({row.state})"
    return write_enqueue(UpstreamWrite.Kind.DEMOTION_SYNC, f"demotion:{row.pk}", label=label, demotion=row)


def demotions_sync_stale(minutes: float = 10, limit: int = 50) -> int:
    """The sweeper's reconciliation: every active row not compared with GitHub for a while gets a
    sync, which notices a PR merged or closed by hand and records it."""
    stale = timezone.now() - timedelta(minutes=minutes)
    rows = DemotionPullRequest.objects.filter(state__in=DemotionPullRequest.ACTIVE_STATES).select_related("project")
    rows = list(rows.filter(synced_at__lt=stale) | rows.filter(synced_at__isnull=True))[:limit]
    for row in rows:
        sync_enqueue(row)
    return len(rows)


# --- the pull request's text ----------------------------------------------------------------------


def missed_names(status: dict) -> list[str]:
    return [c.get("criterion", "") for c in status.get("criteria") or [] if c.get("met") is False]


def demotion_body(row: DemotionPullRequest) -> str:
    status, repo = row.evidence or {}, row.project.full_name
    lines = [
        f"<!-- crcr-demotion:{repo} -->",
        f"### CRCR: demote {md_code(repo)} from {row.from_level} to {row.to_level}",
        "",
        f"Over the last {status.get('windowDays') or 7} days {md_code(repo)} misses upstream's demotion criteria "
        f"(end-to-end p50 < 3 h, timeout rate < 1 %, pass rate ≥ 90 %). This PR moves its allowlist entry "
        f"from {row.from_level} to {row.to_level}.",
        "",
        "| Criterion | Measured | Target | Met |",
        "|---|---:|---:|:---:|",
        *(_criterion_row(c) for c in status.get("criteria") or []),
        "",
        f"**Missed:** {', '.join(md_code(name) for name in missed_names(status)) or 'none'}.",
        "",
        *_excused_lines(status.get("passRate") or {}),
        *_oncall_lines(row.project),
        "",
        _footer(row),
    ]
    return "\n".join(lines)[:60000]


def _criterion_row(c: dict) -> str:
    name, measured, target = c.get("criterion", ""), c.get("measured"), c.get("target")
    shown = _value(name, measured)
    if name == "pass_rate" and "raw" in c:
        shown += f" (decided on {c.get('decidedBy')}; raw {_value(name, c.get('raw'))}, adjusted {_value(name, c.get('adjusted'))})"
    sign = "≥" if name in AT_LEAST else "<"
    met = {True: "✓ yes", False: "✗ no", None: "– no data"}[c.get("met")]
    return f"| {md_code(name)} | {shown} | {sign} {_value(name, target)} | {met} |"


def _value(name: str, value) -> str:
    if not isinstance(value, (int, float)):
        return "no data"
    if name.endswith("_rate"):
        return f"{value * 100:.1f} %"
    if name.endswith("_days"):
        return f"{value:g} d"
    return f"{value / 3600:.1f} h" if value >= 3600 else f"{value / 60:.0f} min"


def _excused_lines(rates: dict) -> list[str]:
    excused = rates.get("excused") or []
    if not excused:
        return ["**Excused failures:** none: every failed job in the window counts against the backend.", ""]
    lines = [
        f"**Excused failures** ({len(excused)}: shared with the reference or a known upstream issue; "
        "left out of the adjusted pass rate):"
    ]
    for e in excused[:EXCUSED_LISTED]:
        links = "; ".join(
            md_link(md_code(ev.get("label"), 120), _absolute(ev.get("url"))) for ev in e.get("evidence") or []
        )
        lines.append(
            f"- {md_code(short_sha(str(e.get('sha', ''))))} · {md_code(e.get('job'), 200)} — {links or 'no link'}"
        )
    if len(excused) > EXCUSED_LISTED:
        lines.append(f"- … and {len(excused) - EXCUSED_LISTED} more (the level-status API lists all)")
    return [*lines, ""]


def _oncall_lines(project: Project) -> list[str]:
    # The registry's oncall handles are the only mentions the relay writes (as in the oncall comment).
    handles = oncall_list(project.oncalls)
    return [f"cc {' '.join(f'@{h}' for h in handles)}: this repo's oncalls."] if handles else []


def _footer(row: DemotionPullRequest) -> str:
    base = settings.CRCR_PUBLIC_URL
    page = md_link("backend page", f"{base}/crcr/{row.project.full_name}")
    api = md_link("level-status", f"{base}/api/v1/level-status?repo={row.project.full_name}")
    return (
        f"Opened by the CRCR relay ({page} · {api}). Merging is a person's call; the relay refreshes this PR "
        "and closes it itself when the repo is back within target."
    )


def _absolute(url) -> str:
    url = str(url or "")
    return f"{settings.CRCR_PUBLIC_URL}{url}" if url.startswith("/") else url


def closing_note(row: DemotionPullRequest) -> str:
    return (
        f"**Closed by the CRCR relay:** {md_code(row.project.full_name)} is back within the demotion criteria "
        f"({timezone.now():%Y-%m-%d %H:%M} UTC).\n\n"
    )


def text_digest(title: str, body: str) -> str:
    return hashlib.sha256(json.dumps([title, body]).encode()).hexdigest()
