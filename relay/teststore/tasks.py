"""The test store's beat task (relay.teststore.store.store_sweep), then the clustering of the
failures it stored by reason (relay.teststore.causes) and the issues filed for the causes that
matter (relay.checks.cause_issues)."""

from relay.checks.cause_issues import cause_issues_sweep
from relay.queues import FOLLOW_UP, relay_task
from relay.teststore.causes import causes_sweep

from .store import store_sweep


@relay_task("relay.test_store_sweep", FOLLOW_UP, acks_late=True, soft_time_limit=240, time_limit=290)
def test_store_sweep() -> int:
    """Every (backend, commit) whose jobs finished since the last run, into the test store; then
    their failures (and, after a change of the reason algorithm, older ones) put in clusters, and
    the opted-in backends' issues for the causes that matter opened, updated or closed."""
    changed = store_sweep()
    causes_sweep()
    cause_issues_sweep()
    return changed
