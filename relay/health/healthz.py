"""What /healthz reports: each dependency checked with a short timeout, never hanging. Anyone may
call it, so a failure says which dependency failed, never the exception's text (hosts, users,
paths): that goes to the log."""

import logging
import time
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.utils import timezone

from relay.models import RelayState

logger = logging.getLogger(__name__)
HEARTBEAT_KEY = "worker-heartbeat"


class HealthProblem(Exception):
    """A failure described in our own words, safe to show."""


HEARTBEAT_STALE_AFTER = timedelta(minutes=2)


def _timed(check) -> dict:
    started = time.monotonic()
    try:
        result = {"ok": True, **(check() or {})}
    except HealthProblem as exc:
        result = {"ok": False, "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - a health check reports every failure as data
        logger.warning("health check %s failed: %s: %s", check.__name__.strip("_"), exc.__class__.__name__, exc)
        result = {"ok": False, "error": "unavailable (details in the server log)"}
    result["ms"] = round((time.monotonic() - started) * 1000, 1)
    return result


def _database():
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return {"vendor": connection.vendor}


def _cache():
    cache.set("healthz", "1", 10)
    if cache.get("healthz") != "1":
        raise HealthProblem("cache did not return what was written")
    return {"backend": settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1]}


def _broker():
    with current_app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=2)
        return {"transport": conn.transport_cls if isinstance(conn.transport_cls, str) else "redis"}


def _worker():
    beat = RelayState.objects.filter(key=HEARTBEAT_KEY).first()
    if beat is None:
        raise HealthProblem("no heartbeat from a worker yet")
    age = timezone.now() - beat.updated_at
    if age > HEARTBEAT_STALE_AFTER:
        raise HealthProblem(f"last worker heartbeat {int(age.total_seconds())} s ago")
    return {"last_seen": beat.updated_at.isoformat()}


def health_report() -> dict:
    checks = {"database": _timed(_database), "cache": _timed(_cache), "broker": _timed(_broker)}
    checks["worker"] = _timed(_worker) if checks["database"]["ok"] else {"ok": False, "error": "database unavailable"}
    status = "ok" if all(c["ok"] for c in checks.values()) else ("down" if not checks["database"]["ok"] else "degraded")
    return {"status": status, "sandbox": settings.CRCR_SANDBOX, "checks": checks}


def heartbeat_record() -> None:
    RelayState.objects.update_or_create(key=HEARTBEAT_KEY, defaults={"value": {"at": timezone.now().isoformat()}})
