"""The enablement pages' reads (relay.enablement): backends × integration paths with the OpenReg
reference's row first, one backend's modules (a path's, when asked), and its enabled tests per
path over the window as a plotly figure for the backend page."""

from dataclasses import dataclass

from hud import charts
from relay.enablement.backend import BackendEnablement, DayPoint, backend_enablement, enabled_history
from relay.enablement.paths import PATHS
from relay.enablement.table import TREND_DAYS, Table, enablement_table
from relay.models import Project
from relay.results.cells import reference_backend, registered_backends

__all__ = ["PATHS", "TREND_DAYS", "backend_modules", "enabled_history_page", "enablement_page", "path_known"]


def enablement_page(now=None) -> Table:
    return enablement_table(now)


def backend_modules(project: Project, path: str = "", now=None, variant: str | None = None) -> BackendEnablement:
    return backend_enablement(project, reference_backend(registered_backends()), path, now, variant)


def path_known(path: str) -> bool:
    return path in PATHS


@dataclass
class EnablementHistory:
    points: list[DayPoint]
    figure: dict | None
    """None when fewer than one day has counts."""


def enabled_history_page(project: Project, now=None) -> EnablementHistory:
    points = enabled_history(project, now)
    return EnablementHistory(points, enabled_figure(points) if points else None)


def enabled_figure(points: list[DayPoint]) -> dict:
    """One line per path with any test passed in the window; each its own dash and marker, named
    in the legend and the hover, so colour is never the only signal."""
    days = [p.day.isoformat() for p in points]
    traces = []
    for i, path in enumerate(path for path in PATHS if any(p.passed[path] for p in points)):
        style = charts._style(i)
        traces.append(
            {
                "type": "scatter",
                "x": days,
                "y": [p.passed[path] for p in points],
                "name": path,
                "mode": "lines+markers",
                "line": {"color": style["color"], "dash": style["dash"], "width": 2},
                "marker": {"symbol": style["symbol"], "size": 7},
                "hovertemplate": "%{y} passed<extra>" + path + "</extra>",
            }
        )
    return charts._figure(traces, charts._layout("tests passed"))
