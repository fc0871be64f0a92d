"""Plotly figures for /crcr/metrics, built in Python and handed to the page as plain dicts
(`json_script`); static/js/hud-charts.js draws them with the vendored plotly.js and applies the
light or dark theme from the page's CSS variables, so nothing here names a background colour.

Colour is never the only signal: each backend also gets its own marker symbol, line dash or bar
pattern, and every trace is named in the legend and the hover text."""

import json

import plotly.graph_objects as go

from hud.selectors_metrics import Metrics

PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#8c6d31", "#999999")
"""Okabe–Ito: tells colours apart for colour-blind readers and reads on light and dark."""
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "cross", "triangle-down")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
PATTERNS = ("", "/", "\\", "x", ".", "+", "-", "|")
HEIGHT = 340


def _style(i: int) -> dict:
    return {
        "color": PALETTE[i % len(PALETTE)],
        "symbol": SYMBOLS[i % len(SYMBOLS)],
        "dash": DASHES[i % len(DASHES)],
        "pattern": PATTERNS[i % len(PATTERNS)],
    }


def _layout(y_title: str, **extra) -> dict:
    """The chart's title is the figure caption in the page (hud/templates/hud/metrics.html), not inside the SVG."""
    return {
        "height": HEIGHT,
        "margin": {"l": 56, "r": 12, "t": 8, "b": 36},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "hovermode": "x unified",
        "legend": {"orientation": "h", "x": 0, "y": -0.12, "yanchor": "top"},
        "xaxis": {"type": "date", "tickformat": "%b %d", "nticks": 10},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
        **extra,
    }


def _figure(traces: list[dict], layout: dict) -> dict:
    """Traces and layout are plain dicts, so plotly's validation (~15 ms a chart, five charts a
    page) is skipped here; tests/hud/test_charts.py validates every figure instead."""
    return json.loads(go.Figure(data=traces, layout=layout, _validate=False).to_json())


def _days(metrics: Metrics) -> list[str]:
    """plotly.js reads "2026-12-02" and "2026-12-02 15:00" as UTC wall time (it ignores offsets)."""
    return [point.strftime("%Y-%m-%d %H:%M") if metrics.hourly else point.isoformat() for point in metrics.days]


def _hourly_axis(figure: dict, metrics: Metrics) -> dict:
    if metrics.hourly:
        figure["layout"]["xaxis"]["tickformat"] = "%H:%M" if len(metrics.days) <= 24 else "%a %H:%M"
    return figure


def pass_rate_figure(metrics: Metrics) -> dict:
    traces = []
    for i, series in enumerate(metrics.with_data):
        style = _style(i)
        rates = series.values(lambda t: None if t.rates.pass_rate is None else round(t.rates.pass_rate * 100, 2))
        traces.append(
            {
                "type": "scatter",
                "x": _days(metrics),
                "y": rates,
                "name": series.project.label,
                "mode": "lines+markers",
                "connectgaps": False,
                "line": {"color": style["color"], "dash": style["dash"], "width": 2},
                "marker": {"symbol": style["symbol"], "size": 7},
                "hovertemplate": "%{y:.1f} %<extra>" + series.project.label + "</extra>",
            }
        )
    layout = _layout("pass rate")
    layout["yaxis"].update({"range": [_pass_rate_floor(traces), 101], "rangemode": "normal", "ticksuffix": " %"})
    return _figure(traces, layout)


def _pass_rate_floor(traces: list) -> int:
    """Start the axis a little under the worst day (in tens), so lines near 100 % stay apart."""
    lowest = min((y for trace in traces for y in trace["y"] if y is not None), default=0)
    return max(0, int(lowest // 10) * 10 - 10)


def stacked_figure(metrics: Metrics, y_title: str, pick) -> dict:
    traces = []
    for i, series in enumerate(metrics.with_data):
        style = _style(i)
        traces.append(
            {
                "type": "bar",
                "x": _days(metrics),
                "y": series.values(pick),
                "name": series.project.label,
                "marker": {
                    "color": style["color"],
                    "line": {"width": 0},
                    "pattern": {
                        "shape": style["pattern"],
                        "fillmode": "overlay",
                        "fgcolor": "rgba(255,255,255,0.55)",
                        "size": 7,
                        "solidity": 0.25,
                    },
                },
                "hovertemplate": "%{y:,}<extra>" + series.project.label + "</extra>",
            }
        )
    return _figure(traces, _layout(y_title, barmode="stack", bargap=0.25))


def failures_figure(metrics: Metrics) -> dict:
    return stacked_figure(metrics, "jobs", lambda t: t.rates.failed + t.rates.infra)


def runs_figure(metrics: Metrics) -> dict:
    return stacked_figure(metrics, "jobs", lambda t: t.rates.decided)


def callbacks_figure(metrics: Metrics) -> dict:
    return stacked_figure(metrics, "callbacks", lambda t: t.callbacks)


TIMING_LINES = (
    ("queue p50", lambda t: t.queue.quantile(0.5), "dot", "circle"),
    ("queue p90", lambda t: t.queue.quantile(0.9), "solid", "circle-open"),
    ("execution p50", lambda t: t.execution.quantile(0.5), "dot", "square"),
    ("execution p90", lambda t: t.execution.quantile(0.9), "solid", "square-open"),
)


def timing_figure(metrics: Metrics) -> dict:
    traces = []
    for i, (name, pick, dash, symbol) in enumerate(TIMING_LINES):
        minutes = [None if v is None else round(v / 60, 1) for v in (pick(t) for t in metrics.combined)]
        traces.append(
            {
                "type": "scatter",
                "x": _days(metrics),
                "y": minutes,
                "name": name,
                "mode": "lines+markers",
                "connectgaps": False,
                "line": {"color": PALETTE[0 if i < 2 else 1], "dash": dash, "width": 2},
                "marker": {"symbol": symbol, "size": 8},
                "hovertemplate": "%{y:,.1f} min<extra>" + name + "</extra>",
            }
        )
    return _figure(traces, _layout("minutes"))


def metrics_figures(metrics: Metrics) -> list[tuple[str, str, dict]]:
    """(element name, caption, figure) for each chart on the page."""
    per = "hour (UTC)" if metrics.hourly else "day"
    return [
        (name, caption, _hourly_axis(figure, metrics))
        for name, caption, figure in [
            ("pass-rate", f"Pass rate per {per} (latest attempts)", pass_rate_figure(metrics)),
            ("failures", f"Failures per {per} (failed, timed out, never started)", failures_figure(metrics)),
            ("runs", f"Jobs with a result per {per}", runs_figure(metrics)),
            (
                "timing",
                f"Queue and execution time per {per}, p50 and p90 (all backends in view)",
                timing_figure(metrics),
            ),
            ("callbacks", f"Callbacks accepted per {per}", callbacks_figure(metrics)),
        ]
    ]


def cause_trend_figure(trend: dict) -> dict:
    """Tests failing through one cause per UTC day, one bar series per backend (the cause page)."""
    traces = []
    for i, (name, counts) in enumerate(trend["series"].items()):
        style = _style(i)
        traces.append(
            {
                "type": "bar",
                "x": trend["days"],
                "y": counts,
                "name": name,
                "marker": {"color": style["color"], "pattern": {"shape": style["pattern"], "fillmode": "overlay"}},
                "hovertemplate": "%{y:,} tests<extra>" + name + "</extra>",
            }
        )
    # The legend sits below the plot: one line per backend on a phone, so the figure grows with it.
    height = HEIGHT + 22 * len(traces)
    return _figure(traces, _layout("tests failing", barmode="stack", bargap=0.25, height=height))


QUALITY_AXES = {
    "coverage": ("% of the reference's tests", lambda v: round(v * 100, 2), 80),
    "flaky_share": ("tests that became flaky", lambda v: v, None),
    "time_to_recover": ("days", lambda v: round(v, 3), 3),
}
"""Per quality figure (relay.results.quality): the y axis, a point's scale, and the target line."""


def quality_figures(rows: list[tuple[str, object]]) -> list[tuple[str, str, dict]]:
    """(element name, caption, figure) per quality figure, a trace per backend: each figure's
    series (relay.results.quality), so whether it improves is read off a line, not one number.
    `rows`: (backend label, Quality)."""
    if not rows:
        return []
    built = []
    for key, (y_title, scale, target) in QUALITY_AXES.items():
        figures = [(label, quality.figure(key)) for label, quality in rows]
        traces = [_quality_trace(i, label, f, scale) for i, (label, f) in enumerate(figures)]
        layout = _layout(y_title)
        if target is not None:
            layout["shapes"] = [_target_line(target)]
        first = figures[0][1]
        built.append((f"quality-{key}", f"{first.label}: {first.series_label}", _figure(traces, layout)))
    return built


def _quality_trace(i: int, label: str, figure, scale) -> dict:
    style = _style(i)
    return {
        "type": "scatter",
        "x": [start.isoformat() for start, _ in figure.series],
        "y": [None if value is None else scale(value) for _, value in figure.series],
        "name": label,
        "mode": "lines+markers",
        "connectgaps": False,
        "line": {"color": style["color"], "dash": style["dash"], "width": 2},
        "marker": {"symbol": style["symbol"], "size": 7},
        "hovertemplate": "%{y}<extra>" + label + "</extra>",
    }


def _target_line(value: float) -> dict:
    """The target as a dashed line across the chart (its number is in the table beside it)."""
    return {
        "type": "line",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "y0": value,
        "y1": value,
        "line": {"dash": "dot", "width": 1, "color": "#999999"},
    }
