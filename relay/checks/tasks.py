"""Thin Celery tasks for the upstream PR integration: take ids, call one function, let the rows
carry state. The writers (intake, dispatch, callbacks, the sweepers) name the reaction task they
want, so "find callers" leads from each writer to its reaction and back."""

import logging

from django.conf import settings
from django.db import transaction

from relay.checks import outbox, reactions
from relay.github.writes import SEND_TASK
from relay.levels import demotion
from relay.queues import FOLLOW_UP, relay_task

logger = logging.getLogger(__name__)


@relay_task(SEND_TASK, FOLLOW_UP, acks_late=True, soft_time_limit=60, time_limit=72)
def upstream_write_send(write_pk: int) -> str | None:
    return outbox.write_send(write_pk)


@relay_task("relay.upstream_write_sweep", FOLLOW_UP, acks_late=True)
def upstream_write_sweep() -> int:
    ids = outbox.writes_due(settings.CRCR_SWEEP_BATCH)
    for pk in ids:
        upstream_write_send.apply_async(args=[pk])
    if ids:
        logger.info("sweeper re-sent %s upstream writes", len(ids))
    # Demotion PRs merged or closed by hand are noticed here, not only on the next decision.
    demotion.demotions_sync_stale()
    return len(ids)


# --- reactions ------------------------------------------------------------------------------------


@relay_task("relay.dispatch_react", FOLLOW_UP, acks_late=True, soft_time_limit=60, time_limit=72)
def dispatch_react(dispatch_id: int) -> None:
    reactions.dispatch_reacted(dispatch_id)


@relay_task("relay.job_react", FOLLOW_UP, acks_late=True, soft_time_limit=60, time_limit=72)
def job_react(job_run_id: int) -> None:
    reactions.job_reacted(job_run_id)


@relay_task("relay.delivery_react", FOLLOW_UP, acks_late=True, soft_time_limit=60, time_limit=72)
def delivery_react(delivery_pk: int, event: str, action: str, outcome: str) -> None:
    reactions.delivery_reacted(delivery_pk, event, action, outcome)


@relay_task("relay.upstream_react", FOLLOW_UP, acks_late=True, soft_time_limit=60, time_limit=72)
def upstream_react(kind: str, ids: dict) -> None:
    """The single reaction task of earlier releases: messages already queued under its name
    still run (kind "dispatch", "job" or "delivery")."""
    task = {"dispatch": dispatch_react, "job": job_react, "delivery": delivery_react}[kind]
    task(**ids)


def react_on_commit(task, **ids) -> None:
    """Run a reaction task once the caller's transaction commits (now, outside one), so webhook
    intake and callbacks stay O(1) however many L4 backends the gate must read. If the broker
    cannot take it, react here and now: slower, but nothing is lost. CRCR_UPSTREAM_REACT_INLINE=1
    always reacts inline (tests without a worker)."""
    transaction.on_commit(lambda: _react(task, ids))


def _react(task, ids: dict) -> None:
    if not settings.CRCR_UPSTREAM_REACT_INLINE:
        try:
            task.apply_async(kwargs=ids)
            return
        except Exception as exc:  # noqa: BLE001 - any broker failure: fall back to inline
            logger.warning("could not enqueue %s (reacting inline): %s", task.name, exc)
    try:
        task(**ids)
    except Exception:  # noqa: BLE001 - the writer has answered; never turn this into its error
        logger.exception("%s failed inline for %s", task.name, ids)
