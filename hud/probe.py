"""The health probe's recent heads, each judged by the probe rule (relay.verdicts.probe_state)."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Max, Q

from relay.models import SELF_REPORT_EVENTS, JobRun, Project
from relay.probe import FIELDS as JOB_FIELDS
from relay.verdicts import STATES, Counts, job_verdicts

# --- the health probe ----------------------------------------------------------------------------------

PROBE_SHAS = 5
PROBE_LOOKBACK = timedelta(days=14)


@dataclass
class ProbeHead:
    sha: str
    state: str
    """pass | fail | running, by relay.verdicts.probe_state over the head's jobs."""
    last_at: datetime


def probe_heads(probe: Project, tab: str, now: datetime) -> list[ProbeHead]:
    """The probe's latest few head SHAs of this kind, each judged by the probe rule."""
    kinds = event_filter(tab)
    recent = (
        JobRun.objects.filter(kinds, project=probe, created_at__gte=now - PROBE_LOOKBACK)
        .values("head_sha")
        .annotate(last=Max("created_at"))
        .order_by("-last")[:PROBE_SHAS]
    )
    heads = {row["head_sha"]: row["last"] for row in recent}
    jobs = JobRun.objects.filter(kinds, project=probe, head_sha__in=list(heads)).only(*JOB_FIELDS)
    by_sha: dict = {}
    for job in jobs:
        by_sha.setdefault(job.head_sha, []).append(job)
    return [ProbeHead(sha, _probe_head_state(by_sha.get(sha, [])), last) for sha, last in heads.items()]


def _probe_head_state(jobs: list) -> str:
    counts = {STATES[v.state].counts for v in job_verdicts(jobs, probe=True)}
    if counts & {Counts.FAIL, Counts.INFRA}:
        return "fail"
    return "running" if Counts.PENDING in counts else "pass"


def event_filter(tab: str) -> Q:
    return Q(event_type=tab) if tab in SELF_REPORT_EVENTS else ~Q(event_type__in=SELF_REPORT_EVENTS)
