"""A small store for the enablement reads: the OpenReg reference and a backend on trunk commits
of the last days, their jobs' counts per module written by the writer the sweep and the
reference import use (relay.enablement.counts)."""

from datetime import timedelta

from django.utils import timezone

from relay.enablement.counts import counts_write
from tests.factories import JobRunFactory, ProjectFactory, UpstreamCommitFactory


def commit(days_ago: float, trunk: bool = True):
    return UpstreamCommitFactory(landed_at=timezone.now() - timedelta(days=days_ago), is_trunk=trunk)


def job(project, sha: str, counts: dict, attempt: int = 1, run_id: str = "", **fields):
    row = JobRunFactory(
        project=project,
        head_sha=sha,
        delivery_key=sha,
        run_attempt=attempt,
        run_id=run_id or f"run-{sha[:8]}",
        **fields,
    )
    counts_write(row.id, project.id, sha, row.created_at, counts)
    return row


def backends():
    reference = ProjectFactory(
        full_name="pytorch/openreg-ci", display_name="OpenReg", is_reference=True, hardware_kind="reference"
    )
    backend = ProjectFactory(full_name="intel/torch-xpu-ops", display_name="Intel XPU", device_type="xpu")
    return reference, backend
