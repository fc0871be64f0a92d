"""Where the clustering stands, in one RelayState row: each version's watermark over TestRun
ids (`v<N>`) and the newest version whose clustering of every stored failure is done
(`complete`, the one the pages read)."""

from relay.models import RelayState

from .reasons import VERSION

STATE_KEY = "causes"


def read_version() -> int:
    """The version the pages read: the newest whose clustering of every stored failure is done
    (the current one on a store that never had another)."""
    return state().get("complete", VERSION)


def state() -> dict:
    row = RelayState.objects.filter(key=STATE_KEY).first()
    return dict(row.value) if row else {}


def state_set(**values) -> None:
    RelayState.objects.update_or_create(key=STATE_KEY, defaults={"value": {**state(), **values}})
