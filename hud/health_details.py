"""What a relay-health card's details dialog shows (/crcr/health/<card>): the last runs, each
linked, with "P/N jobs passed", and only the jobs that need attention, each "job: state · time"
linked to its log ("overdue in progress" for a job running past its expected duration). The
probe's runs are judged by the probe rule; retries count by their latest attempt per run and job
(relay/health/probe.py), as upstream's health views count them."""

from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import urlencode

from django.utils import timezone

from hud.templatetags.hud_tags import ago, job_log_url
from relay.health import probe as figures
from relay.models import Delivery, Dispatch, JobRun, Project
from relay.policy.links import pr_path
from relay.policy.run_links import run_host_trusted
from relay.policy.verdicts import FAILING, STATES, State, conclusion_state, job_label, probe_state
from relay.results.overdue import running_jobs_overdue

RUNS_SHOWN = 10
ATTENTION_SHOWN = 25
JOBS_READ = 600
CARDS = {
    "probe": "Relay health probe",
    "deliveries": "Webhook deliveries",
    "dispatch": "Dispatch success",
    "callbacks": "Callbacks accepted",
    "sweeper": "Worker and sweeper",
}


@dataclass(frozen=True)
class Line:
    text: str
    url: str = ""
    detail: str = ""
    state: str = ""
    """A state name for the glyph and colour class (relay.policy.verdicts.State values), or ""."""


@dataclass
class HealthDetails:
    key: str
    title: str
    runs_title: str = "Last runs"
    runs: list[Line] = field(default_factory=list)
    attention: list[Line] = field(default_factory=list)
    empty: str = "Nothing recorded yet."
    now: datetime = field(default_factory=timezone.now)

    @property
    def has_data(self) -> bool:
        return bool(self.runs or self.attention)


def health_details(key: str, now: datetime | None = None) -> HealthDetails | None:
    """None for an unknown card."""
    if key not in CARDS:
        return None
    now = now or timezone.now()
    details = HealthDetails(key, CARDS[key], now=now)
    {
        "probe": _probe,
        "deliveries": _deliveries,
        "dispatch": _dispatch,
        "callbacks": _callbacks,
        "sweeper": _sweeper,
    }[key](details, now)
    return details


# --- runs ------------------------------------------------------------------------------------------


def _run_lines(jobs: list, judge, now: datetime) -> list[Line]:
    """The newest runs among `jobs` (latest attempt per run and job): "P/N jobs passed", linked."""
    runs: dict[tuple[int, str], list] = {}
    for job in figures.latest_per_run_job(jobs):
        runs.setdefault((job.project_id, job.run_id), []).append(job)
    newest = sorted(runs.values(), key=lambda members: max(j.created_at for j in members), reverse=True)
    return [_run_line(members, judge, now) for members in newest[:RUNS_SHOWN]]


def _run_line(members: list, judge, now: datetime) -> Line:
    first = members[0]
    states = [judge(j) for j in members]
    decided = [s for s in states if STATES[s].counts.value in ("pass", "fail", "infra")]
    passed = sum(STATES[s].counts.value == "pass" for s in decided)
    running = len(members) - len(decided)
    what = f"PR #{first.pr_number}" if first.pr_number else first.event_type
    text = f"{first.project.full_name} · {first.workflow_name} #{first.run_id} · {what}"
    detail = f"{passed}/{len(decided)} jobs passed" + (f" · {running} running" if running else "")
    state = (
        State.SUCCESS
        if decided and passed == len(decided) and not running
        else (State.FAILURE if passed < len(decided) else State.RUNNING)
    )
    return Line(text, _run_url(first), f"{detail} · {ago(max(j.created_at for j in members), now)}", state.value)


def _run_url(job) -> str:
    return job.workflow_url if run_host_trusted(job.workflow_url, job.project.ci_provider) else ""


def _attention(jobs: list, judge, now: datetime) -> list[Line]:
    """Latest attempts that did not pass, newest first: "job: state · time", linked to the log."""
    failing = [j for j in figures.latest_per_run_job(jobs) if judge(j) in FAILING]
    failing.sort(key=lambda j: j.completed_at or j.created_at, reverse=True)
    return [
        Line(
            f"{job.project.full_name} {job_label(job)}: {STATES[judge(job)].label}",
            job_log_url(job),
            ago(job.completed_at or job.created_at, now),
            judge(job).value,
        )
        for job in failing[:ATTENTION_SHOWN]
    ]


def _overdue(project: Project | None, now: datetime) -> list[Line]:
    jobs = running_jobs_overdue(project, now)
    by_id = JobRun.objects.select_related("project").in_bulk([j.id for j in jobs[:ATTENTION_SHOWN]])
    return [
        Line(
            f"{job.project.full_name} {job_label(job)}: overdue in progress",
            job_log_url(job),
            f"started {ago(job.in_progress_at, now)}",
            State.OVERDUE.value,
        )
        for job in (by_id[j.id] for j in jobs[:ATTENTION_SHOWN] if j.id in by_id)
    ]


def _recent_jobs(queryset) -> list:
    return list(queryset.select_related("project").order_by("-id")[:JOBS_READ])


# --- the cards -------------------------------------------------------------------------------------


def _probe(details: HealthDetails, now: datetime) -> None:
    probe = figures.probe_project()
    if probe is None:
        details.empty = "No project is marked as the health probe."
        return
    jobs = _recent_jobs(JobRun.objects.filter(project=probe))
    details.runs = _run_lines(jobs, probe_state, now)
    details.attention = _overdue(probe, now) + _attention(jobs, probe_state, now)
    details.empty = f"{probe.full_name} has reported no job yet."


def _callbacks(details: HealthDetails, now: datetime) -> None:
    jobs = _recent_jobs(JobRun.objects.filter(project__is_health_probe=False).exclude(run_id="-"))
    details.runs = _run_lines(jobs, conclusion_state, now)
    details.attention = _attention(jobs, conclusion_state, now)
    details.empty = "No callback has been accepted yet."


def _sweeper(details: HealthDetails, now: datetime) -> None:
    details.runs_title = "Last jobs the sweeper ended"
    swept = JobRun.objects.filter(ended_by__in=[JobRun.EndedBy.TIMED_OUT, JobRun.EndedBy.NEVER_STARTED])
    details.runs = [
        Line(
            f"{job.project.full_name} {job_label(job)}: {STATES[conclusion_state(job)].label}",
            job_log_url(job),
            ago(job.completed_at or job.created_at, now),
            conclusion_state(job).value,
        )
        for job in swept.select_related("project").order_by("-id")[:RUNS_SHOWN]
    ]
    details.attention = _overdue(None, now)
    details.empty = "No job is overdue and the sweeper has ended none."


def _deliveries(details: HealthDetails, now: datetime) -> None:
    details.runs_title = "Last webhook deliveries"
    details.runs = [
        Line(
            f"{d.event}{'.' + d.action if d.action else ''}"
            + (f" · PR #{d.pr_number}" if d.pr_number else (f" · {d.ref}" if d.ref else "")),
            pr_path(d.pr_number) if d.pr_number else f"/relay/deliveries?{urlencode({'event': d.event})}",
            f"{d.get_outcome_display()} · {ago(d.received_at, now)}",
            "success" if d.outcome == Delivery.Outcome.RELAYED else "neutral",
        )
        for d in Delivery.objects.order_by("-received_at")[:RUNS_SHOWN]
    ]
    details.empty = "No webhook delivery has been received yet."


def _dispatch(details: HealthDetails, now: datetime) -> None:
    details.runs_title = "Last dispatches"
    recent = Dispatch.objects.select_related("project").order_by("-id")
    details.runs = [_dispatch_line(d, now) for d in recent[:RUNS_SHOWN]]
    trouble = recent.filter(state__in=[Dispatch.State.FAILED, Dispatch.State.RETRYING])
    details.attention = [_dispatch_line(d, now) for d in trouble[:ATTENTION_SHOWN]]
    details.empty = "Nothing has been dispatched yet."


def _dispatch_line(dispatch: Dispatch, now: datetime) -> Line:
    what = f"PR #{dispatch.pr_number}" if dispatch.pr_number else dispatch.event_type
    state = {"sent": "success", "failed": "failure", "retrying": "running", "pending": "queued"}.get(
        dispatch.state, "neutral"
    )
    return Line(
        f"{dispatch.project.full_name} · {what}: {dispatch.get_state_display()}",
        pr_path(dispatch.pr_number)
        if dispatch.pr_number
        else ("/relay/deliveries?status=failed" if dispatch.state == "failed" else "/relay/deliveries"),
        f"{dispatch.attempts} attempt{'s' if dispatch.attempts != 1 else ''} · {ago(dispatch.created_at, now)}",
        state,
    )
