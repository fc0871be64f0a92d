"""The OpenReg reference's runs imported from upstream's CI every minute (relay.reference.imports)."""

from relay.queues import FOLLOW_UP, relay_task

from .imports import reference_import_sweep


@relay_task("relay.reference_import_sweep", FOLLOW_UP, acks_late=True, soft_time_limit=240, time_limit=290)
def reference_import_sweep_task() -> list[str]:
    return reference_import_sweep(hours=48, limit=20)
