"""Tasks moved beside their services keep their registered names, so messages already queued and
the beat schedule still find them."""

from crcr.celery import app

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
}


def registered() -> set[str]:
    app.loader.import_default_modules()  # what a worker imports at start: each app's tasks module
    return set(app.tasks)


def test_every_name_an_earlier_release_queued_is_still_registered():
    assert NAMES_QUEUED_BY_EARLIER_RELEASES - registered() == set()


def test_every_beat_entry_names_a_registered_task():
    assert {entry["task"] for entry in app.conf.beat_schedule.values()} - registered() == set()
