"""The level loop's periodic tasks (registered under their old "hud." names): detect the events
subscribers hear about (relay.levels.events), keep the summary pages' stored tallies fresh
(relay.levels.tallies.rollups), and hand each backend's level decision (relay.levels.status) to the
demotion loop (relay.checks.demotion)."""

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="hud.notification_events_detect", acks_late=True, soft_time_limit=50, time_limit=60)
def notification_events_detect() -> int:
    from .events import events_detect

    return len(events_detect())


@shared_task(name="hud.rollups_refresh", acks_late=True, soft_time_limit=600, time_limit=720)
def rollups_refresh_task() -> int:
    """Every minute: the hours changed since the last refresh; then the database's statistics."""
    from .maintenance import statistics_refresh
    from .tallies.rollups import rollups_refresh

    report = rollups_refresh()
    statistics_refresh()
    return report.recomputed if report else 0


@shared_task(name="hud.demotion_prs_reconcile", acks_late=True, soft_time_limit=240, time_limit=290)
def demotion_prs_reconcile() -> int:
    """The demotion loop's decisions: every backend's level-status entry (upstream's shape) goes to
    the relay, which opens, refreshes or closes its demotion PR (relay.checks.demotion)."""
    from relay.checks.demotion import demotion_decide

    from .status import level_status
    from .tallies.buckets import TalliesPending

    try:
        statuses = level_status()
    except TalliesPending as pending:  # a fresh store: decide on whole windows only, next run
        logger.info("demotion loop waits for the tallies (%s); nothing decided this run", pending)
        return 0
    decided = 0
    for status in statuses:
        entry = {k: v for k, v in status.as_dict().items() if k != "demotionPr"}
        decided += demotion_decide(status.project.pk, entry) is not None
    return decided
