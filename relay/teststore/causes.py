"""Clustering stored failures by reason, in the test store's minute sweep (never the callback).

Every TestRun row (one failed test of one job attempt) gets a CauseHit under the current
algorithm version (relay.policy.reasons.VERSION), in TestRun id order from a watermark kept
per version: new rows are the ones past it, and a new version starts from zero, so the same
walk that clusters new failures re-clusters the old ones. Until the new version's walk has
caught up, the pages read the last version that had (relay.results.causes.read_version); then the older
versions' clusters are deleted. What the lists count is kept beside the hits (relay/teststore/cause_counts.py),
written in the same step.

The sweep is the store's only writer of TestRun rows besides the backfill and rematch
commands, and runs after it in the same task, so ids past the watermark are never committed
behind it by the sweep itself."""

import logging
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Right

from relay.models import CauseHit, FailedTest, FailureCause, JobRun, RelayState, TestIdentity, TestRun
from relay.models.teststore import rows_insert
from relay.policy.reasons import MAX_INPUT, VERSION, Reason, reason_of
from relay.results.causes import STATE_KEY, clustering_state

from .cause_counts import cause_counts_write
from .store import job_identities

logger = logging.getLogger(__name__)
BATCH = 2000
"""TestRun rows per step: a job's 1,000 failures are one step."""


@dataclass
class Seen:
    reason: Reason
    first: object
    last: object
    hits: list = field(default_factory=list)


def causes_sweep(limit: int = 10_000) -> int:
    """Cluster up to `limit` unclustered failures; once none is left under this version,
    retire the older versions. Returns how many failures were clustered."""
    done = 0
    while done < limit:
        last = clustering_state().get(f"v{VERSION}", 0)
        rows = list(TestRun.objects.filter(id__gt=last).order_by("id").values_list("id", "job_run_id")[:BATCH])
        if not rows:
            _caught_up()
            break
        with transaction.atomic():
            hits_write(sorted({job_id for _, job_id in rows}))
            clustering_state_set(**{f"v{VERSION}": rows[-1][0]})
        done += len(rows)
    return done


def hits_write(job_ids: list[int]) -> int:
    """Every failed test of these attempts put in its cluster under VERSION (idempotent)."""
    reported = _failed_tests(job_ids)
    seen: dict[str, Seen] = {}
    jobs = JobRun.objects.filter(pk__in=job_ids).select_related("project")
    by_commit: dict[tuple, list] = {}
    for job in jobs:
        by_commit.setdefault((job.project, job.head_sha), []).append(job)
    for (project, sha), commit_jobs in by_commit.items():
        _commit_reasons(project, sha, commit_jobs, reported, seen)
    ids = causes_upsert(seen)
    hits = [{**hit, "cause_id": ids[digest]} for digest, one in seen.items() for hit in one.hits]
    rows_insert(CauseHit, hits)
    cause_counts_write(VERSION, job_ids)
    return len(hits)


def _commit_reasons(project, sha: str, jobs: list, reported: dict, seen: dict[str, Seen]) -> None:
    rows = job_identities(project, sha, jobs, reported)
    identities = TestIdentity.objects.ids_for({tid for _, tid in rows})
    for (job_id, tid), (job, _, test) in rows.items():
        reason = reason_of(test.get("message", ""), test.get("stack_tail", ""), project.device_type)
        one = seen.setdefault(reason.digest, Seen(reason, job.created_at, job.created_at))
        one.first, one.last = min(one.first, job.created_at), max(one.last, job.created_at)
        one.hits.append(
            {
                "version": VERSION,
                "project_id": project.pk,
                "job_run_id": job_id,
                "identity_id": identities[tid],
                "sha": sha,
                "created_at": job.created_at,
            }
        )


def _failed_tests(job_ids: list[int]) -> dict[int, list[dict]]:
    """The attempts' failed tests as relay.results.cells reads them for identities, with the
    message and the stack trace's tail (bounded: the reason reads no more)."""
    device = KeyTextTransform("device", "job_run__environment")
    rows = FailedTest.objects.filter(job_run_id__in=job_ids).annotate(
        env_device=device, stack_tail=Right("stacktrace", MAX_INPUT)
    )
    tests: dict[int, list] = {}
    fields = ("job_run_id", "name", "classname", "file", "hw_classification", "outcome", "env_device", "message")
    for row in rows.values(*fields, "stack_tail"):
        row["message"] = row["message"][:MAX_INPUT]
        tests.setdefault(row["job_run_id"], []).append(row)
    return tests


def causes_upsert(seen: dict[str, Seen]) -> dict[str, int]:
    """digest → FailureCause id, made where missing; first and last seen widened."""
    existing = {c.digest: c for c in FailureCause.objects.filter(digest__in=list(seen))}
    rows_insert(FailureCause, [_cause_row(one) for digest, one in seen.items() if digest not in existing])
    for digest, cause in existing.items():
        one = seen[digest]
        if one.first < cause.first_seen_at or one.last > cause.last_seen_at:
            FailureCause.objects.filter(pk=cause.pk).update(
                first_seen_at=min(one.first, cause.first_seen_at), last_seen_at=max(one.last, cause.last_seen_at)
            )
    return dict(FailureCause.objects.filter(digest__in=list(seen)).values_list("digest", "id"))


def _cause_row(one: Seen) -> dict:
    reason = one.reason
    return {
        "version": VERSION,
        "digest": reason.digest,
        "kind": reason.kind,
        "exception": reason.exception[:200],
        "signature": reason.signature,
        "operator": reason.operator,
        "example": reason.example,
        "first_seen_at": one.first,
        "last_seen_at": one.last,
    }


def _caught_up() -> None:
    """Every stored failure has its cluster under VERSION: read it, and drop the older ones."""
    if clustering_state().get("complete") == VERSION:
        return
    with transaction.atomic():
        clustering_state_set(complete=VERSION)
        retired = FailureCause.objects.filter(version__lt=VERSION).delete()[0]
    logger.info("causes: version %s complete, %s older rows retired", VERSION, retired)


def clustering_state_set(**values) -> None:
    RelayState.objects.update_or_create(key=STATE_KEY, defaults={"value": {**clustering_state(), **values}})
