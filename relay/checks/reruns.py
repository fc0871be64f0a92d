"""Re-runs asked for on the upstream PR. "Re-run" on one of our job check runs re-runs that
downstream run's failed jobs; "Re-run all checks" lists the suite's check runs and re-runs every
distinct downstream run. Each re-run is a RerunRequest row (the re-run attempt's queue time is
measured from it) and an outbox write, sent with the downstream repo's installation token.
Only our own check runs of L3/L4 GitHub Actions backends are re-run."""

import logging

from django.conf import settings
from django.utils import timezone

from relay.github.writes import Plan, Skip, write_enqueue
from relay.inputs.params import int_param

from ..github import client as github
from ..github.installations import installation_id_for
from ..github.upstream import upstream_installation_id
from ..models import CIProvider, Delivery, Level, Project, RerunRequest, UpstreamCheckRun, UpstreamWrite

logger = logging.getLogger(__name__)
ALREADY_RUNNING = "already running"


def is_ours(app: dict | None) -> bool:
    """Only the App that owns a check run gets its re-run requests; check anyway when we can."""
    app_id = (app or {}).get("id")
    return app_id is None or not settings.GITHUB_APP_ID or str(app_id) == str(settings.GITHUB_APP_ID)


def parse_name(name: str, external: str) -> tuple[str, str] | None:
    """(repo, run_id) from `crcr/<owner>/<repo>/<workflow>/<job>` and `<run_id>:…`."""
    parts = (name or "").split("/")
    run_id = (external or "").split(":")[0]
    if len(parts) < 5 or parts[0] != "crcr" or not parts[1] or not parts[2] or run_id in ("", "-"):
        return None
    return f"{parts[1]}/{parts[2]}", run_id


def downstream_run(check_run: dict) -> tuple[Project, str] | str:
    """The downstream (project, run id) behind one of our check runs, or why there is none. The
    stored mapping wins; the name and external_id cover check runs made before it existed."""
    row = UpstreamCheckRun.objects.select_related("project").filter(github_id=check_run.get("id")).first()
    if row is not None and (row.kind != UpstreamCheckRun.Kind.JOB or not row.run_id):
        return "not a downstream job's check run"
    if row is not None:
        project, run_id = row.project, row.run_id
    else:
        parsed = parse_name(check_run.get("name", ""), check_run.get("external_id", ""))
        if parsed is None:
            return "not a crcr check run"
        project, run_id = Project.objects.filter(full_name__iexact=parsed[0]).first(), parsed[1]
    return _rerunnable(project, run_id)


def _rerunnable(project: Project | None, run_id: str) -> tuple[Project, str] | str:
    if project is None or project.level not in (Level.L3, Level.L4):
        return "downstream repo not L3+"
    if project.ci_provider != CIProvider.GITHUB or int_param(run_id) is None:
        return "not a GitHub Actions run"
    return project, run_id


# --- from deliveries --------------------------------------------------------------------------------


def check_run_rerequested(delivery: Delivery) -> UpstreamWrite | None:
    check_run = delivery.payload.get("check_run") or {}
    found = downstream_run(check_run) if is_ours(check_run.get("app")) else "not our check run"
    if isinstance(found, str):
        logger.info("re-run of check run %s ignored: %s", check_run.get("id"), found)
        return None
    return rerun_request(found[0], found[1], "failed", delivery)


def check_suite_rerequested(delivery: Delivery) -> UpstreamWrite | None:
    suite = delivery.payload.get("check_suite") or {}
    if not suite.get("id") or not is_ours(suite.get("app")):
        return None
    return write_enqueue(
        UpstreamWrite.Kind.SUITE_RERUN,
        f"suite:{delivery.pk}",
        label=f"re-run all checks of suite {suite['id']}",
        delivery=delivery,
    )


def rerun_request(project: Project, run_id: str, kind: str, delivery: Delivery | None) -> UpstreamWrite:
    """One request per (repo, run) while one is unsent: "Re-run failed checks" clicks every
    failed check of the same run."""
    unsent = UpstreamWrite.objects.filter(
        rerun__project=project, rerun__run_id=run_id, rerun__kind=kind, state__in=UpstreamWrite.UNSENT_STATES
    ).first()
    if unsent is not None:
        return unsent
    request = RerunRequest.objects.create(project=project, run_id=run_id, kind=kind, delivery=delivery)
    what = "failed jobs of " if kind == "failed" else ""
    return write_enqueue(
        UpstreamWrite.Kind.RERUN,
        f"rerun:{request.pk}",
        label=f"re-run {what}{project.full_name} run {run_id}",
        rerun=request,
    )


# --- sending ----------------------------------------------------------------------------------------


def suite_rerun_prepare(write: UpstreamWrite) -> Plan:
    """The outbox handler for "Re-run all checks": list the suite, then one re-run per run."""
    suite_id = write.delivery.payload["check_suite"]["id"]
    path = f"/repos/{settings.CRCR_UPSTREAM_REPO}/check-suites/{suite_id}/check-runs?per_page=100"
    return Plan(
        "GET",
        path,
        upstream_installation_id(),
        paginate_key="check_runs",
        on_sent=lambda r: _suite_fan_out(write.delivery, r.json),
    )


def _suite_fan_out(delivery: Delivery, check_runs: list[dict]) -> str:
    runs: dict[tuple[int, str], Project] = {}
    for check_run in check_runs:
        found = downstream_run(check_run) if is_ours(check_run.get("app")) else "not ours"
        if not isinstance(found, str):
            runs.setdefault((found[0].pk, found[1]), found[0])
    for (_, run_id), project in runs.items():
        rerun_request(project, run_id, "all", delivery)
    return f"{len(check_runs)} check runs, {len(runs)} downstream run(s) to re-run"


def rerun_prepare(write: UpstreamWrite) -> Plan | Skip:
    """The outbox handler for one re-run, with the downstream repo's installation token."""
    request = RerunRequest.objects.select_related("project").get(pk=write.rerun_id)
    repo = request.project.full_name
    suffix = "rerun-failed-jobs" if request.kind == "failed" else "rerun"
    path = f"/repos/{repo}/actions/runs/{request.run_id}/{suffix}"
    return Plan(
        "POST",
        path,
        installation_id_for(repo),
        on_sent=lambda r: _answered(request, "requested"),
        on_error=lambda exc: _refused(request, exc),
    )


def _answered(request: RerunRequest, outcome: str) -> str:
    # The re-run's queue time starts when GitHub was asked, not when the button was clicked.
    RerunRequest.objects.filter(pk=request.pk).update(outcome=outcome, requested_at=timezone.now())
    return f"{request.project.full_name} run {request.run_id}: {outcome.replace('_', ' ')}"


def _refused(request: RerunRequest, exc: github.GitHubError) -> str | None:
    if exc.status == 403 and ALREADY_RUNNING in str(exc).lower():
        RerunRequest.objects.filter(pk=request.pk).update(outcome="already_running")
        return f"{request.project.full_name} run {request.run_id}: {ALREADY_RUNNING}"
    if isinstance(exc, github.PermanentGitHubError):
        RerunRequest.objects.filter(pk=request.pk).update(outcome=f"failed: {exc.status}")
    return None
