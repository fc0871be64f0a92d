"""Fanning a delivery out: one dispatch row per eligible downstream project, made in the
intake's transaction; the send tasks are kicked after commit. Nothing here calls GitHub."""

import functools
import logging

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from relay.policy.links import short_sha

from ..github import installations
from ..models import BISECT_EVENT, Delivery, Dispatch, Project
from .tasks import delivery_fan_out

logger = logging.getLogger(__name__)


NOT_INSTALLED_NOTE = "the App is not installed on this repository"


def dispatches_create(delivery: Delivery, projects=None) -> int:
    """One dispatch row per eligible project (every dispatch target, or the `projects` given);
    repos known not to have the App are marked so at once instead of failing on every event.
    Older heads of the same PR become moot. Nightly-only repos (allowlist `events: [nightly]`)
    take no PR or push dispatch.

    The rows are made by one INSERT … SELECT: building them as model instances cost ~65 µs of CPU
    per row, so intake grew with every registered repo (docs/performance.md)."""
    sql, params = _dispatch_insert(delivery, None if projects is None else [p.pk for p in projects])
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        count = cursor.rowcount
    _supersede_older_heads(delivery)
    transaction.on_commit(lambda: _kick_fan_out(delivery.pk))
    return count


def _dispatch_insert(delivery: Delivery, project_ids: list[int] | None) -> tuple[str, list]:
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    if project_ids is None:
        among, among_params = _targets_sql()
    else:
        among, among_params = ", ".join(["%s"] * len(project_ids)) or "NULL", project_ids
    sql = _INSERT.format(
        dispatch=Dispatch._meta.db_table,
        project=Project._meta.db_table,
        missing=installations.known_missing_sql("p"),
        takes_pull_requests=_TAKES_PULL_REQUESTS[connection.vendor],
        among=among,
    )
    row = [delivery.pk, NOT_INSTALLED_NOTE, delivery.event, delivery.pr_number, delivery.head_sha, now, now, now]
    return sql, [*row, *among_params]


_INSERT = (
    "INSERT INTO {dispatch} (delivery_id, project_id, state, last_error, event_type, pr_number, head_sha,"
    " next_attempt_at, created_at, updated_at, attempts, resent_by, attempts_before_resend)"
    " SELECT %s, t.id, CASE WHEN t.missing THEN 'not_installed' ELSE 'pending' END,"
    " CASE WHEN t.missing THEN %s ELSE '' END, %s, %s, %s, %s, %s, %s, 0, '', 0"
    " FROM (SELECT p.id, ({missing}) AS missing FROM {project} p"
    " WHERE p.id IN ({among}) AND {takes_pull_requests}) t"
)
_TAKES_PULL_REQUESTS = {
    # Project.takes_pull_requests: an empty `events` list means every event.
    "postgresql": "(p.events IN ('[]'::jsonb, 'null'::jsonb) OR p.events @> '[\"pull_request\"]'::jsonb)",
    "sqlite": "(json_array_length(p.events) = 0"
    " OR EXISTS (SELECT 1 FROM json_each(p.events) e WHERE e.value = 'pull_request'))",
}


@functools.cache
def _targets_sql() -> tuple[str, tuple]:
    """Project.objects.dispatch_targets() as a subquery, compiled once (its SQL never changes)."""
    return Project.objects.dispatch_targets().values("pk").query.sql_with_params()


def _supersede_older_heads(delivery: Delivery) -> None:
    if delivery.event != "pull_request" or not delivery.pr_number or not delivery.head_sha:
        return
    note = f"superseded by head {short_sha(delivery.head_sha)} ({delivery.guid})"
    with connection.cursor() as cursor:
        cursor.execute(
            _SUPERSEDE.format(dispatch=Dispatch._meta.db_table),
            [note, delivery.pr_number, delivery.head_sha, delivery.pk],
        )


# The open states are literals, as in dispatch_open_pr_idx's condition: SQLite uses a partial
# index only when the statement repeats its condition, not through bound parameters.
_SUPERSEDE = (
    "UPDATE {dispatch} SET state = 'superseded', last_error = %s"
    " WHERE pr_number = %s AND event_type = 'pull_request' AND state IN ('pending', 'retrying')"
    " AND head_sha <> %s AND delivery_id <> %s"
)


def _kick_fan_out(delivery_pk: int) -> None:
    """Best effort: if the broker is down the rows stay pending and the sweeper sends them."""
    try:
        delivery_fan_out.apply_async(args=[delivery_pk])
    except Exception as exc:  # noqa: BLE001 - any broker failure; the sweeper is the fallback
        logger.warning("could not enqueue fan-out for delivery %s (sweeper will send): %s", delivery_pk, exc)


class ResendRefused(Exception):
    """The delivery cannot be sent again (its payload was pruned by retention)."""


def dispatches_resend(delivery, projects, *, by: str) -> int:
    """Operator action: send a delivery again to chosen projects. Additive: a project's existing
    dispatch is reopened (its attempts, and the jobs that answered it, stay); a project that never
    had one gets a fresh row. A dispatch being sent right now is left to finish."""
    if delivery.payload_pruned_at is not None:
        raise ResendRefused(f"{delivery.guid}: its payload was pruned by retention, so it cannot be sent again")
    if delivery.event == BISECT_EVENT:
        # A probe again would be one the backend's daily budget never counted (relay.bisect.probes).
        raise ResendRefused(f"{delivery.guid} is a bisection probe: the bisection dispatches its own probes")
    projects = list(projects)
    now = timezone.now()
    with transaction.atomic():
        existing = Dispatch.objects.select_for_update().filter(delivery=delivery, project__in=projects)
        have = set(existing.values_list("project_id", flat=True))
        reopened = existing.exclude(state=Dispatch.State.SENDING).update(
            state=Dispatch.State.PENDING,
            next_attempt_at=now,
            lease_expires_at=None,
            resent_at=now,
            resent_by=by[:150],
            attempts_before_resend=F("attempts"),
            last_error=f"re-dispatched by {by}"[:2000],
        )
        created = dispatches_create(delivery, [p for p in projects if p.pk not in have])
    logger.info("%s re-dispatched delivery %s: %s reopened, %s new", by, delivery.guid, reopened, created)
    return reopened + created
