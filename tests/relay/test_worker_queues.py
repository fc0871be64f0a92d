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
