"""Retention: what the relay stops keeping once it is no longer needed.

Webhook payloads (up to 25 MB each) and callback bodies (up to 2 MB, as sent) are kept for
CRCR_RETENTION_PAYLOAD_DAYS / CRCR_RETENTION_CALLBACK_BODY_DAYS (default 30; 0 keeps them
forever), then cut down; the results themselves are never touched — deliveries, dispatches and
every attempt, job runs with their conclusions, timings, counts and failed tests all stay.

- A delivery's payload becomes a small skeleton of what the relay still reads later (the PR's
  number, head and label names, for `ciflow/crcr/*` decisions) and `payload_pruned_at` is set;
  such a delivery can no longer be re-dispatched. Deliveries with a dispatch still to send keep
  their payload.
- A completed job's stored callback body is emptied.
- The test store (relay/models/teststore.py) keeps CRCR_RETENTION_TEST_DAYS (90) of outcomes and
  tested commits: older TestRun and TestedCommit rows are deleted (on a partitioned relay_testrun,
  dropping a month's partition does the same at once: docs/scaling.md), and with them each failed
  test's cause (CauseHit, and the counts kept beside them: a commit's or test's once its latest
  failure is older) and the causes last seen before then. Identities, flakiness states and
  mutes stay: they are one row per test, not per run. Counts per test module (ModuleCount, the
  enablement view's, and CountedCommit, its commits) are kept as long as test outcomes.

A beat task runs this every six hours, in bounded batches."""

import json
import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models.fields.json import KT
from django.utils import timezone

from relay.models import (
    CauseCommit,
    CauseHit,
    CauseRun,
    CauseTest,
    CountedCommit,
    Delivery,
    Dispatch,
    FailureCause,
    JobRun,
    ModuleCount,
    TestedCommit,
    TestRun,
)

logger = logging.getLogger(__name__)
BATCH = 200
MAX_BATCHES = 50
_SKELETON_FIELDS = {
    "k_action": "payload__action",
    "k_number": "payload__number",
    "k_pr_number": "payload__pull_request__number",
    "k_head_sha": "payload__pull_request__head__sha",
    "k_head_ref": "payload__pull_request__head__ref",
    "k_labels": "payload__pull_request__labels",
}


def retention_sweep(now=None) -> dict:
    now = now or timezone.now()
    done = {"payloads": 0, "bodies": 0, "test_runs": 0}
    if settings.CRCR_RETENTION_PAYLOAD_DAYS > 0:
        done["payloads"] = _batches(
            lambda: payloads_prune(now - timedelta(days=settings.CRCR_RETENTION_PAYLOAD_DAYS), now)
        )
    if settings.CRCR_RETENTION_CALLBACK_BODY_DAYS > 0:
        done["bodies"] = _batches(
            lambda: bodies_prune(now - timedelta(days=settings.CRCR_RETENTION_CALLBACK_BODY_DAYS))
        )
    if settings.CRCR_RETENTION_TEST_DAYS > 0:
        done["test_runs"] = _batches(lambda: test_store_prune(now - timedelta(days=settings.CRCR_RETENTION_TEST_DAYS)))
    if any(done.values()):
        logger.info(
            "retention: pruned %s webhook payloads, %s callback bodies and %s test-store rows",
            done["payloads"],
            done["bodies"],
            done["test_runs"],
        )
    return done


def _batches(prune) -> int:
    total = 0
    for _ in range(MAX_BATCHES):
        count = prune()
        total += count
        if count < BATCH:
            break
    return total


def payloads_prune(cutoff, now) -> int:
    """One batch: payloads older than `cutoff` cut to their skeleton (read from the database key
    by key, never the whole payload)."""
    unsent = Dispatch.objects.filter(state__in=(*Dispatch.OPEN_STATES, Dispatch.State.SENDING)).values("delivery_id")
    due = (
        Delivery.objects.filter(received_at__lt=cutoff, payload_pruned_at__isnull=True)
        .exclude(pk__in=unsent)
        .order_by("pk")
    )
    rows = list(due.values("pk", **{name: KT(path) for name, path in _SKELETON_FIELDS.items()})[:BATCH])
    with transaction.atomic():
        for row in rows:
            Delivery.objects.filter(pk=row["pk"], payload_pruned_at__isnull=True).update(
                payload=payload_skeleton(row), payload_pruned_at=now
            )
    return len(rows)


def payload_skeleton(keys: dict) -> dict:
    row = {name.removeprefix("k_"): value for name, value in keys.items()}
    skeleton = {"crcr_pruned": True}
    if row.get("action"):
        skeleton["action"] = row["action"]
    if row.get("pr_number") or row.get("head_sha"):
        labels = row.get("labels")
        labels = _json(labels) if isinstance(labels, str) else labels
        names = [
            {"name": str(label["name"])}
            for label in labels or []
            if isinstance(label, dict) and isinstance(label.get("name"), str)
        ]
        skeleton["pull_request"] = {
            "number": _int(row.get("pr_number")),
            "head": {"sha": row.get("head_sha") or "", "ref": row.get("head_ref") or ""},
            "labels": names,
        }
    if row.get("number"):
        skeleton["number"] = _int(row["number"])
    return skeleton


def _json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return []


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def bodies_prune(cutoff) -> int:
    """One batch: stored callback bodies of jobs completed before `cutoff` emptied."""
    due = JobRun.objects.filter(status=JobRun.Status.COMPLETED, completed_at__lt=cutoff).exclude(body={}).order_by("pk")
    ids = list(due.values_list("pk", flat=True)[:BATCH])
    return JobRun.objects.filter(pk__in=ids).update(body={}) if ids else 0


def test_store_prune(cutoff) -> int:
    """One batch: test outcomes, tested commits, module counts (and their counted commits) and
    failures' causes dated before `cutoff` deleted."""
    done = 0
    dated = [(m, "created_at") for m in (TestRun, TestedCommit, ModuleCount, CountedCommit, CauseHit, CauseRun)]
    for model, field in [*dated, (CauseCommit, "last_at"), (CauseTest, "last_at")]:
        old = model.objects.filter(**{f"{field}__lt": cutoff}).order_by(field)
        ids = list(old.values_list("pk", flat=True)[:BATCH])
        done += model.objects.filter(pk__in=ids).delete()[0] if ids else 0
    gone = list(FailureCause.objects.filter(last_seen_at__lt=cutoff).values_list("pk", flat=True)[:BATCH])
    return done + (FailureCause.objects.filter(pk__in=gone).delete()[0] if gone else 0)
