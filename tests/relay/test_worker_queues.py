"""Two queues, one worker each: the send path never waits behind reactions, upstream writes or
long sweeps for a thread or a prefetch slot."""

from crcr.celery import DISPATCH_QUEUE, FOLLOW_UP_QUEUE, WORKERS, app, worker_command

SEND_PATH = ("relay.delivery_fan_out", "relay.dispatch_send", "relay.dispatch_sweep")
FOLLOW_UPS = ("relay.delivery_react", "relay.dispatch_react", "relay.job_react", "relay.upstream_write_send")


def queue_of(name: str) -> str:
    return app.amqp.router.route({}, name)["queue"].name


def test_the_send_path_stays_on_the_dispatch_queue():
    assert {queue_of(name) for name in SEND_PATH} == {DISPATCH_QUEUE}


def test_reactions_and_upstream_writes_go_to_the_follow_up_queue():
    assert {queue_of(name) for name in FOLLOW_UPS} == {FOLLOW_UP_QUEUE}


def test_every_registered_task_goes_to_a_queue_some_worker_consumes():
    app.loader.import_default_modules()
    names = [name for name in app.tasks if not name.startswith("celery.")]
    assert {queue_of(name) for name in names} <= set(WORKERS)


def test_each_worker_consumes_only_its_own_queue():
    for queue in (DISPATCH_QUEUE, FOLLOW_UP_QUEUE):
        command = worker_command(queue)
        assert command[command.index("--queues") + 1] == queue


LONG_SWEEPS = (
    "relay.rollups_refresh",
    "relay.test_store_sweep",
    "relay.retention_sweep",
    "relay.demotion_prs_reconcile",
)


def test_the_long_sweeps_stay_off_the_send_queue():
    """The rollups' 600 s refresh ran on the send queue while it was registered as hud.rollups_refresh."""
    app.loader.import_default_modules()
    assert {queue_of(name) for name in LONG_SWEEPS} == {FOLLOW_UP_QUEUE}


def test_every_task_is_routed_to_the_queue_it_declares_beside_its_code():
    app.loader.import_default_modules()
    declared = {name: task.queue for name, task in app.tasks.items() if name.startswith(("relay.", "hud."))}
    assert all(declared.values())
    assert {name: queue_of(name) for name in declared} == declared


def test_a_former_name_runs_the_same_function_on_the_same_queue():
    app.loader.import_default_modules()
    for old, new in (
        ("hud.rollups_refresh", "relay.rollups_refresh"),
        ("hud.demotion_prs_reconcile", "relay.demotion_prs_reconcile"),
    ):
        assert app.tasks[old].run is app.tasks[new].run
        assert queue_of(old) == queue_of(new) == FOLLOW_UP_QUEUE
