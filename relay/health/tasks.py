"""The relay's health on a schedule: the worker heartbeat /healthz reads, and the alerts' rules."""

from relay.queues import DISPATCH, FOLLOW_UP, relay_task

from .healthz import heartbeat_record


@relay_task("relay.alerts_evaluate", FOLLOW_UP, acks_late=True, soft_time_limit=50, time_limit=60)
def alerts_evaluate_task() -> list[str]:
    """The relay's health alerts (relay/health/alerts.py), every minute: the rules firing now."""
    from .alerts import alerts_evaluate

    return [reading.rule for reading in alerts_evaluate() if reading.firing]


@relay_task("relay.heartbeat", DISPATCH, ignore_result=True)
def heartbeat() -> None:
    """On the send queue: a worker that still takes dispatches is the one /healthz vouches for."""
    heartbeat_record()
