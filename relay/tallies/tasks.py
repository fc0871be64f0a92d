"""The summary pages' stored tallies kept fresh (relay.tallies.rollups), then the database's
planner statistics (relay.ops.statistics). Registered as "hud.rollups_refresh" once, still accepted."""

from relay.queues import FOLLOW_UP, relay_task


@relay_task(
    "relay.rollups_refresh",
    FOLLOW_UP,
    former=("hud.rollups_refresh",),
    acks_late=True,
    soft_time_limit=600,
    time_limit=720,
)
def rollups_refresh_task() -> int:
    """Every minute: the hours changed since the last refresh; then the database's statistics."""
    from relay.ops.statistics import statistics_refresh
    from relay.tallies.rollups import rollups_refresh

    report = rollups_refresh()
    statistics_refresh()
    return report.recomputed if report else 0
