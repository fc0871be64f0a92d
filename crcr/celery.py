import os

from celery import Celery
from celery.schedules import crontab

from . import broker  # noqa: F401 - registers the embedded crcrfs:// transport

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "crcr.settings")

app = Celery("crcr")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

app.conf.beat_schedule = {
    "every-minute-sweep-dispatches": {
        "task": "relay.dispatch_sweep",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-minute-sweep-upstream-writes": {
        "task": "relay.upstream_write_sweep",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-2-minutes-sweep-results": {
        "task": "relay.results_sweep",
        "schedule": 120.0,
        "options": {"expires": 110},
    },
    "every-minute-import-reference-runs": {
        "task": "relay.reference_import_sweep",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-30s-worker-heartbeat": {
        "task": "relay.heartbeat",
        "schedule": 30.0,
        "options": {"expires": 25},
    },
    "every-6-hours-retention": {
        "task": "relay.retention_sweep",
        "schedule": 6 * 3600.0,
        "options": {"expires": 3600},
    },
    "every-minute-sweep-notifications": {
        "task": "relay.notification_sweep",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-minute-refresh-hud-rollups": {
        "task": "hud.rollups_refresh",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "every-minute-detect-notification-events": {
        "task": "hud.notification_events_detect",
        "schedule": 60.0,
        "options": {"expires": 55},
    },
    "daily-notification-digests": {
        "task": "relay.notification_digests",
        "schedule": crontab(hour=0, minute=10),
        "options": {"expires": 3600},
    },
    "hourly-sync-installations": {
        "task": "relay.installations_sync",
        "schedule": 3600.0,
        "options": {"expires": 600},
    },
}


@app.on_after_configure.connect
def _make_broker_folders(sender, **kwargs):
    # The embedded (filesystem) broker needs its folders before the first publish.
    options = sender.conf.broker_transport_options or {}
    for key in ("data_folder_in", "data_folder_out", "processed_folder", "control_folder"):
        if options.get(key):
            os.makedirs(options[key], exist_ok=True)
