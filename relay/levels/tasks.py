"""The level loop's periodic tasks: hand each backend's level decision (relay.levels.status) to the
demotion loop (relay.levels.demotion) and detect the at-risk events subscribers hear about
(relay.levels.events). Each ran under a "hud." name once, still accepted."""

import logging

from relay.queues import FOLLOW_UP, relay_task

logger = logging.getLogger(__name__)


@relay_task(
    "relay.demotion_prs_reconcile",
    FOLLOW_UP,
    former=("hud.demotion_prs_reconcile",),
    acks_late=True,
    soft_time_limit=240,
    time_limit=290,
)
def demotion_prs_reconcile() -> int:
    """The demotion loop's decisions: every backend's level-status entry (upstream's shape) goes to
    the relay, which opens, refreshes or closes its demotion PR (relay.levels.demotion)."""
    from relay.tallies.buckets import TalliesPending

    from .demotion import demotion_decide
    from .status import level_status

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


@relay_task("relay.level_events_detect", FOLLOW_UP, acks_late=True, soft_time_limit=50, time_limit=60)
def level_events_detect() -> int:
    from django.utils import timezone

    from .events import readiness_events

    return len(readiness_events(timezone.now()))


@relay_task("hud.notification_events_detect", FOLLOW_UP, acks_late=True, soft_time_limit=50, time_limit=60)
def notification_events_detect() -> int:
    """An earlier release's one beat entry for trunk and level events: messages and beat rows
    written before the upgrade still run both."""
    from .events import events_detect

    return len(events_detect())
