"""The HUD's periodic tasks: detect the events subscribers hear about (hud.events), and keep the
summary pages' stored tallies fresh (hud.tallies.rollups)."""

from celery import shared_task


@shared_task(name="hud.notification_events_detect", acks_late=True, soft_time_limit=50, time_limit=60)
def notification_events_detect() -> int:
    from .events import events_detect

    return len(events_detect())


@shared_task(name="hud.rollups_refresh", acks_late=True, soft_time_limit=600, time_limit=720)
def rollups_refresh() -> int:
    """Every minute: the hours changed since the last refresh; then the database's statistics."""
    from .maintenance import statistics_refresh
    from .tallies.rollups import rollups_refresh as refresh

    report = refresh()
    statistics_refresh()
    return report.recomputed if report else 0
