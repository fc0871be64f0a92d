"""Watermarks of the sweeps that follow new results (trunk events, the test store): how far the
last run got, kept in a RelayState row, read back with an overlap so that a row committed just
after a run is not missed (each sweep is idempotent, so the overlap is read twice harmlessly)."""

from django.utils.dateparse import parse_datetime

from relay.models import RelayState


def watermark_read(key: str, now, first_lookback, overlap):
    """Where the sweep named `key` starts: its last run's time minus `overlap`, or, the first
    time, `now - first_lookback`."""
    state = RelayState.objects.filter(key=key).first()
    if state is None or not state.value.get("at"):
        return now - first_lookback
    return parse_datetime(state.value["at"]) - overlap


def watermark_move(key: str, now) -> None:
    RelayState.objects.update_or_create(key=key, defaults={"value": {"at": now.isoformat()}})
