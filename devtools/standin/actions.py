"""GitHub Actions read endpoints the reference importer uses: workflow runs for a SHA, a run's
jobs (latest attempt by default), its artifacts, the artifact download and a job's log. Downloads
answer 302 to an unauthenticated blob URL as GitHub does (clients must not forward their token
there); a log's blob is plain text. PyTorch's S3 test-report bucket is in standin.s3."""

import secrets
from dataclasses import dataclass, field

from werkzeug.wrappers import Response

from .access import readable
from .http import Call, HTTPError, Routes, iso, json_response, paginate
from .state import ids_unique_across_restarts

route = Routes()


@dataclass
class Artifact:
    id: int
    name: str
    data: bytes
    expired: bool = False
    blob: str = field(default_factory=lambda: secrets.token_urlsafe(16))


@dataclass
class WorkflowRun:
    id: int
    repo: str
    head_sha: str
    name: str
    event: str
    status: str
    conclusion: str | None
    run_attempt: int
    jobs: list = field(default_factory=list)
    """[{id, name, status, conclusion, run_attempt, html_url}] across attempts."""
    artifacts: list = field(default_factory=list)
    created_at: str = field(default_factory=iso)


class ActionsWorld:
    def __init__(self):
        self.runs: dict[int, WorkflowRun] = {}
        self.artifacts: dict[int, Artifact] = {}
        self.logs: dict[int, tuple[str, bytes]] = {}
        """job id → (blob token, the log's text as GitHub serves it)."""
        self.ids = ids_unique_across_restarts(30_000_000_000)  # above 2**31 like real run and job ids

    def new_id(self) -> int:
        return next(self.ids)


def actions(world) -> ActionsWorld:
    if not hasattr(world, "actions"):
        world.actions = ActionsWorld()
    return world.actions


def run_json(base: str, run: WorkflowRun) -> dict:
    return {
        "id": run.id,
        "name": run.name,
        "head_sha": run.head_sha,
        "event": run.event,
        "status": run.status,
        "conclusion": run.conclusion,
        "run_attempt": run.run_attempt,
        "created_at": run.created_at,
        "html_url": f"https://github.com/{run.repo}/actions/runs/{run.id}",
        "jobs_url": f"{base}/repos/{run.repo}/actions/runs/{run.id}/jobs",
        "artifacts_url": f"{base}/repos/{run.repo}/actions/runs/{run.id}/artifacts",
    }


def _base(call: Call) -> str:
    return call.request.host_url.rstrip("/")


@route("/repos/<owner>/<name>/actions/runs", "GET")
def runs_list(call: Call, owner: str, name: str):
    repo = readable(call, owner, name)
    sha = (call.request.args.get("head_sha") or "").lower()
    runs = [
        r
        for r in actions(call.standin.world).runs.values()
        if r.repo.lower() == repo["full_name"].lower() and (not sha or r.head_sha == sha)
    ]
    page, headers = paginate(call, [run_json(_base(call), r) for r in sorted(runs, key=lambda r: -r.id)])
    return json_response({"total_count": len(runs), "workflow_runs": page}, headers=headers)


def _run(call: Call, owner: str, name: str, run_id: int) -> WorkflowRun:
    repo = readable(call, owner, name)
    run = actions(call.standin.world).runs.get(run_id)
    if run is None or run.repo.lower() != repo["full_name"].lower():
        raise HTTPError(404, "Not Found")
    return run


@route("/repos/<owner>/<name>/actions/runs/<int:run_id>/jobs", "GET")
def run_jobs(call: Call, owner: str, name: str, run_id: int):
    run = _run(call, owner, name, run_id)
    everything = call.request.args.get("filter", "latest") == "all"
    jobs = [j for j in run.jobs if everything or j["run_attempt"] == run.run_attempt]
    page, headers = paginate(call, [{**j, "run_id": run.id, "head_sha": run.head_sha} for j in jobs])
    return json_response({"total_count": len(jobs), "jobs": page}, headers=headers)


@route("/repos/<owner>/<name>/actions/runs/<int:run_id>/artifacts", "GET")
def run_artifacts(call: Call, owner: str, name: str, run_id: int):
    run = _run(call, owner, name, run_id)
    base = _base(call)
    items = [
        {
            "id": a.id,
            "name": a.name,
            "size_in_bytes": len(a.data),
            "expired": a.expired,
            "workflow_run": {"id": run.id, "head_sha": run.head_sha},
            "archive_download_url": f"{base}/repos/{run.repo}/actions/artifacts/{a.id}/zip",
        }
        for a in run.artifacts
    ]
    page, headers = paginate(call, items)
    return json_response({"total_count": len(items), "artifacts": page}, headers=headers)


@route("/repos/<owner>/<name>/actions/artifacts/<int:artifact_id>/zip", "GET")
def artifact_download(call: Call, owner: str, name: str, artifact_id: int):
    readable(call, owner, name)
    artifact = actions(call.standin.world).artifacts.get(artifact_id)
    if artifact is None:
        raise HTTPError(404, "Not Found")
    if artifact.expired:
        raise HTTPError(410, "Artifact has expired")
    return Response(status=302, headers={"Location": f"{_base(call)}/_blobs/{artifact.blob}"})


@route("/repos/<owner>/<name>/actions/jobs/<int:job_id>/logs", "GET")
def job_logs(call: Call, owner: str, name: str, job_id: int):
    """GitHub answers 302 to a short-lived plain-text URL, or 404 when the job kept no log."""
    repo = readable(call, owner, name)["full_name"].lower()
    state = actions(call.standin.world)
    log = state.logs.get(job_id)
    owned = any(r.repo.lower() == repo and any(j["id"] == job_id for j in r.jobs) for r in state.runs.values())
    if log is None or not owned:
        raise HTTPError(404, "Not Found")
    return Response(status=302, headers={"Location": f"{_base(call)}/_blobs/{log[0]}"})


@route("/_blobs/<blob>", "GET")
def blob_download(call: Call, blob: str):
    if call.request.headers.get("Authorization"):
        raise HTTPError(400, "blob storage refuses an Authorization header it did not issue")
    state = actions(call.standin.world)
    for artifact in state.artifacts.values():
        if artifact.blob == blob:
            return Response(artifact.data, status=200, content_type="application/zip")
    for token, text in state.logs.values():
        if token == blob:
            return Response(text, status=200, content_type="text/plain; charset=utf-8")
    raise HTTPError(404, "BlobNotFound")


def add_workflow_run(
    world,
    repo: str,
    head_sha: str,
    *,
    name="pull",
    event="pull_request",
    status="completed",
    conclusion="success",
    run_attempt=1,
    jobs=(),
    artifacts=(),
) -> WorkflowRun:
    """jobs: [{name, conclusion, status?, run_attempt?, log?}] (log: the job's log, str or bytes);
    artifacts: [{name, data, expired?}]."""
    state = actions(world)
    run = WorkflowRun(state.new_id(), repo, head_sha.lower(), name, event, status, conclusion, run_attempt)
    for job in jobs:
        job_id = state.new_id()
        run.jobs.append(
            {
                "id": job_id,
                "name": job["name"],
                "status": job.get("status", "completed"),
                "conclusion": job.get("conclusion"),
                "run_attempt": job.get("run_attempt", run_attempt),
                "html_url": f"https://github.com/{repo}/actions/runs/{run.id}/job/{job_id}",
                "started_at": iso(),
                "completed_at": iso() if job.get("status", "completed") == "completed" else None,
            }
        )
        if job.get("log") is not None:
            text = job["log"].encode() if isinstance(job["log"], str) else job["log"]
            state.logs[job_id] = (secrets.token_urlsafe(16), text)
    for spec in artifacts:
        artifact = Artifact(
            state.new_id(),
            spec["name"].format(job_id=run.jobs[-1]["id"] if run.jobs else 0),
            spec["data"],
            spec.get("expired", False),
        )
        state.artifacts[artifact.id] = artifact
        run.artifacts.append(artifact)
    state.runs[run.id] = run
    return run
