"""The ranges and tabs of the summary pages: which window of time, which kind of run."""

from dataclasses import dataclass
from datetime import timedelta

# --- ranges and tabs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    key: str
    label: str
    days: int
    stale_after: timedelta
    """A backend with no result for this long is shown as stale (in words, not only colour)."""


WINDOWS = {
    "24h": Window("24h", "Last 24 hours", 1, timedelta(hours=6)),
    "7d": Window("7d", "Last 7 days", 7, timedelta(hours=24)),
    "14d": Window("14d", "Last 14 days", 14, timedelta(days=2)),
    "30d": Window("30d", "Last 30 days", 30, timedelta(days=3)),
    "90d": Window("90d", "Last 90 days", 90, timedelta(days=3)),
}
"""1, 7, 14, 30 and 90 days, as every upstream CRCR page offers them."""
DEFAULT_WINDOW = "7d"
RANGE_ALIASES = {"1d": "24h", "1": "24h", "7": "7d", "14": "14d", "30": "30d", "90": "90d"}
"""Other spellings of the same ranges (upstream's pages count in days: 1, 7, 14, 30, 90)."""


def window_key(value: str | None) -> tuple[str, str]:
    """(the range key, a notice): the default range when none is asked for, an alias read as
    its range, and anything else the default with a notice saying so (never silently)."""
    if not value:
        return DEFAULT_WINDOW, ""
    key = RANGE_ALIASES.get(value, value)
    if key in WINDOWS:
        return key, ""
    shown = value[:20]
    return (
        DEFAULT_WINDOW,
        f"Unknown range “{shown}”: showing {WINDOWS[DEFAULT_WINDOW].label.lower()} (offered: 24h, 7d, 14d, 30d, 90d).",
    )


TABS = {"pr": "Pull requests", "nightly": "Nightly", "periodic": "Periodic"}
"""The pages' tabs of runs (relay.stats.runkinds.tab_of: `pr` is every kind but the self-reported ones)."""
DEFAULT_TAB = "pr"


def default_tab(project) -> str:
    """The tab a backend's page opens on: a nightly-only backend has no PR runs to show."""
    return "nightly" if project.nightly_only else DEFAULT_TAB


NIGHTLY_STALE_AFTER = timedelta(hours=26)
"""Nightly and periodic backends report about once a day; a day and a bit of silence is stale."""


def stale_after(window: Window, tab: str) -> timedelta:
    return window.stale_after if tab == "pr" else max(window.stale_after, NIGHTLY_STALE_AFTER)
