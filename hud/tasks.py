"""The HUD's one periodic task: detect the events subscribers hear about (hud.events)."""

from celery import shared_task


@shared_task(name="hud.notification_events_detect", acks_late=True, soft_time_limit=50, time_limit=60)
def notification_events_detect() -> int:
    from .events import events_detect

    return len(events_detect())
