"""Tasks moved beside their services keep their registered names, so messages already queued and
the beat schedule still find them."""

import ast
from pathlib import Path

from crcr.celery import app

ROOT = Path(__file__).resolve().parents[2]

NAMES_QUEUED_BY_EARLIER_RELEASES = {
    "relay.delivery_fan_out",
    "relay.dispatch_send",
    "relay.dispatch_sweep",
    "relay.installations_sync",
    "relay.heartbeat",
    "relay.results_sweep",
    "relay.reference_import_sweep",
    "relay.upstream_write_send",
    "relay.upstream_write_sweep",
    "relay.upstream_react",
    "relay.issue_occurrences_record",
    "relay.notification_send",
    "relay.notification_sweep",
    "relay.notification_digests",
    "hud.notification_events_detect",
    "hud.rollups_refresh",
    "hud.demotion_prs_reconcile",
}


def registered() -> set[str]:
    app.loader.import_default_modules()  # what a worker imports at start: each app's tasks module
    return set(app.tasks)


def test_every_name_an_earlier_release_queued_is_still_registered():
    assert NAMES_QUEUED_BY_EARLIER_RELEASES - registered() == set()


def test_every_beat_entry_names_a_registered_task():
    assert {entry["task"] for entry in app.conf.beat_schedule.values()} - registered() == set()


def product_functions() -> dict[str, list[str]]:
    """Every public module-level function of the product, by name: where each is defined."""
    found: dict[str, list[str]] = {}
    for top in ("relay", "hud", "api"):
        for path in (ROOT / top).rglob("*.py"):
            if "migrations" not in path.parts:
                for node in ast.parse(path.read_text()).body:
                    if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                        found.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    return found


def test_no_task_shares_its_name_with_the_service_it_wraps():
    """`find callers` of a service must not turn up its task's callers (and the other way round)."""
    app.loader.import_default_modules()
    defined = product_functions()
    task_functions = {task.run.__name__ for name, task in app.tasks.items() if name.startswith(("relay.", "hud."))}
    assert {name: defined[name] for name in task_functions if len(defined.get(name, [])) > 1} == {}


def test_each_outbox_kind_names_its_send_task_once():
    """The outbox kicks a row's send by the registered name its kind declares; the task is
    registered under that same constant, so neither can be renamed alone."""
    from relay.checks.outbox import UpstreamWrites
    from relay.dispatch.sending import Dispatches
    from relay.notify.delivery import Notifications

    kinds = (Dispatches, UpstreamWrites, Notifications)
    assert {kind.task_name for kind in kinds} <= registered()
    literals = [
        path for path in (ROOT / "relay").rglob("*.py") for kind in kinds if f'"{kind.task_name}"' in path.read_text()
    ]
    assert len(literals) == len(kinds)
