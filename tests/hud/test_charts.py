"""Plotly figures for /crcr/metrics, as plain JSON-ready dicts."""

import json
from datetime import date, timedelta

import plotly.graph_objects as go

from hud import charts
from hud.selectors_metrics import BackendSeries, Metrics
from relay.models import Project
from relay.policy.verdicts import State
from relay.tallies.tally import Tally

DAYS = [date(2026, 11, 28) + timedelta(days=i) for i in range(3)]


def day(passed: int, failed: int = 0, callbacks: int = 0) -> Tally:
    tally = Tally()
    tally.verdicts.update({State.SUCCESS: passed, State.FAILURE: failed})
    tally.in_progress_callbacks = callbacks
    tally.attempts = passed + failed
    return tally


def metrics(*series_days) -> Metrics:
    series = [BackendSeries(Project(full_name=f"org{i}/repo"), list(days)) for i, days in enumerate(series_days)]
    combined = [day(0) for _ in DAYS]
    return Metrics(DAYS, series, combined, "pr")


def test_it_leaves_days_without_runs_as_gaps_never_zeros():
    figure = charts.pass_rate_figure(metrics([day(9, 1), None, day(10)]))
    assert figure["data"][0]["y"] == [90.0, None, 100.0]
    assert figure["data"][0]["connectgaps"] is False


def test_it_stacks_failures_per_backend():
    figure = charts.failures_figure(metrics([day(1, 2), day(1, 0), None], [day(0, 1), None, day(3, 3)]))
    assert figure["layout"]["barmode"] == "stack"
    assert [trace["y"] for trace in figure["data"]] == [[2, 0, None], [1, None, 3]]


def test_it_gives_every_backend_a_shape_as_well_as_a_colour():
    figure = charts.pass_rate_figure(metrics([day(1)] * 3, [day(1)] * 3))
    symbols = {trace["marker"]["symbol"] for trace in figure["data"]}
    dashes = {trace["line"]["dash"] for trace in figure["data"]}
    assert len(symbols) == 2 and len(dashes) == 2


def test_it_starts_the_pass_rate_axis_just_under_the_worst_day():
    figure = charts.pass_rate_figure(metrics([day(93, 7), day(100), day(96, 4)]))
    assert figure["layout"]["yaxis"]["range"] == [80, 101]


def test_it_leaves_the_background_to_the_page_theme():
    layout = charts.runs_figure(metrics([day(1)] * 3))["layout"]
    assert layout["paper_bgcolor"] == layout["plot_bgcolor"] == "rgba(0,0,0,0)"


def test_it_builds_every_chart_of_the_page_as_valid_plotly_json():
    built = charts.metrics_figures(metrics([day(5, 1, callbacks=6), None, day(4)], [day(1)] * 3))
    assert [name for name, _, _ in built] == ["pass-rate", "failures", "runs", "timing", "callbacks"]
    for _, _, figure in built:
        go.Figure(figure)  # plotly's own validation: raises on any property it does not know
    json.dumps([figure for _, _, figure in built])


def test_it_only_draws_trace_types_the_vendored_basic_plotly_bundle_has():
    """static/vendor/plotly-basic.min.js has scatter, bar and pie; anything else would fail in the page."""
    built = charts.metrics_figures(metrics([day(5, 1, callbacks=6), None, day(4)], [day(1)] * 3))
    assert {trace["type"] for _, _, figure in built for trace in figure["data"]} <= {"scatter", "bar", "pie"}


def test_it_plots_each_quality_figure_s_trend_a_trace_per_backend_with_its_target():
    from datetime import UTC, datetime, timedelta

    from relay.results.quality import Quality, QualityFigure

    start = datetime(2026, 12, 1, tzinfo=UTC)
    days = [start + timedelta(days=n) for n in range(3)]

    def quality(values):
        return Quality(
            1,
            [
                QualityFigure(key, key, None, "", None, series=list(zip(days, values)), series_label=f"{key} per day")
                for key in ("coverage", "flaky_share", "time_to_recover")
            ],
        )

    built = charts.quality_figures([("Intel XPU", quality([0.5, None, 0.9])), ("AMD ROCm", quality([0.7, 0.8, 0.1]))])
    assert [name for name, _, _ in built] == ["quality-coverage", "quality-flaky_share", "quality-time_to_recover"]
    coverage = built[0][2]
    assert [t["name"] for t in coverage["data"]] == ["Intel XPU", "AMD ROCm"]
    assert coverage["data"][0]["y"] == [50.0, None, 90.0] and coverage["layout"]["shapes"][0]["y0"] == 80
    assert "shapes" not in built[1][2]["layout"] and built[2][2]["layout"]["shapes"][0]["y0"] == 3
    for _, _, figure in built:
        go.Figure(figure)
    assert charts.quality_figures([]) == []
