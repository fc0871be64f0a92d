"""The worker's two queues, named once, and the one way a relay task is registered: under its
`relay.*` name, on the queue it declares, and again under any name an earlier release queued or
scheduled it by, so messages already in the broker and beat rows written before an upgrade still
find it. crcr/celery.py routes every task to the queue it declares."""

from celery import shared_task

DISPATCH = "celery"
"""The send path: a delivery's fan-out and its repository dispatches (and the worker heartbeat)."""
FOLLOW_UP = "follow_up"
"""What follows a record (reactions, upstream writes, triage, notifications) and housekeeping
sweeps that may run long: on their own queue and worker, so a dispatch send never waits behind
them for a thread or a prefetch slot (docs/performance.md, fan-out)."""


def relay_task(name: str, queue: str, former: tuple[str, ...] = (), **options):
    """`@shared_task(name=…, queue=…)`, registered under each `former` name too."""

    def register(fun):
        for old in former:
            shared_task(name=old, queue=queue, **options)(fun)
        return shared_task(name=name, queue=queue, **options)(fun)

    return register
