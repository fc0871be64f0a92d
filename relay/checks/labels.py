"""`ciflow/crcr/<device>` labels: whether an L3 backend shows check runs on a PR, and what adding or
removing the label does. The PR's labels are read from the latest pull_request delivery's payload
(labeled, unlabeled, reopened, ... all carry the current set), so a reopened PR keeps what its
labels say and out-of-order label events settle on the newest one."""

from ..models import Delivery, Level, Project, UpstreamCheckRun
from ..results import gate
from ..results.heads import LABEL_PREFIX, device_label, pr_head, pr_labels
from .checkruns import backend_check_run_refresh, check_run_refresh, job_check_run_refresh, open_check_runs
from .oncall import oncall_refresh


def check_runs_wanted(project: Project, pr_number: int) -> bool:
    """L4: always. L3: while the PR carries the device's label. Below, and for nightly-only repos
    (which take no PR work): never."""
    if project.nightly_only:
        return False
    if project.level == Level.L4:
        return True
    return project.level == Level.L3 and bool(project.device) and device_label(project) in pr_labels(pr_number)


def label_projects(label: str) -> list[Project]:
    device = label[len(LABEL_PREFIX) :] if label.lower().startswith(LABEL_PREFIX) else ""
    projects = Project.objects.filter(level=Level.L3, active=True, device__iexact=device) if device else []
    return [p for p in projects if p.takes_pull_requests]


def label_changed(delivery: Delivery) -> None:
    """Backfill or withdraw, by what the labels say now (not by which event arrived last)."""
    for project in label_projects(delivery.label):
        if check_runs_wanted(project, delivery.pr_number):
            backfill(project, delivery.pr_number, delivery.head_sha or pr_head(delivery.pr_number))
        else:
            withdraw(project, delivery.pr_number)


def backfill(project: Project, pr_number: int, head_sha: str) -> None:
    """Show what is already recorded for the PR head: the backend's check run if it was
    dispatched, and each job's latest attempt (running ones are updated when they finish)."""
    backend_check_run_refresh(project, pr_number, head_sha)
    for verdict in gate.backend_verdicts(project, pr_number, head_sha):
        job_check_run_refresh(verdict.job)
    oncall_refresh(project, pr_number)


def withdraw(project: Project, pr_number: int) -> None:
    """Complete the backend's open check runs as neutral, with a note; finished ones stay."""
    for row in open_check_runs(pr_number, project):
        UpstreamCheckRun.objects.filter(pk=row.pk).update(withdrawn=True)
        row.withdrawn = True
        check_run_refresh(row)
