"""/metrics for Prometheus: the relay's figures (relay/health/metrics.py) and, from the HUD, every L2–L4
backend's level criteria as the level-status API computes them (relay.levels.status). One
registry, read at scrape time; the text is shared for CRCR_METRICS_CACHE_SECONDS so several
scrapers (or a fast one) cost one round of queries."""

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector

from relay.health.metrics import CALLBACK_ANSWERS, RelayCollector, multiprocess
from relay.levels.status import CRITERION_NAMES, level_status
from relay.ops.cache import soft_get, soft_set
from relay.tallies.buckets import TalliesPending

CACHE_KEY = "hud:metrics:v1"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""The text format generate_latest writes, as every Prometheus 2.x server reads it."""


class LevelsCollector:
    """crcr_level_criterion_{measured,target,met}{repo, level, criterion, window_days}: what decides
    each backend's promotion (L2, 14 days) or demotion (L3/L4, 7 days). A criterion without data
    has no `measured` and no `met` sample ("no data" is never met or missed)."""

    def collect(self):
        labels = ["repo", "level", "criterion", "window_days"]
        measured = GaugeMetricFamily(
            "crcr_level_criterion_measured", "A level criterion's measured value", labels=labels
        )
        target = GaugeMetricFamily("crcr_level_criterion_target", "A level criterion's target", labels=labels)
        met = GaugeMetricFamily(
            "crcr_level_criterion_met", "1 when the level criterion is met, 0 when missed", labels=labels
        )
        pending = 0.0
        try:
            statuses = level_status()
        except TalliesPending:  # a cold store: the next scrape has them
            statuses, pending = [], 1.0
        for status in statuses:
            for c in status.criteria:
                key = [status.project.full_name, status.project.level, CRITERION_NAMES[c.key], str(status.window_days)]
                if c.target is not None:
                    target.add_metric(key, float(c.target))
                if c.measured is not None:
                    measured.add_metric(key, float(c.measured))
                if c.met is not None:
                    met.add_metric(key, 1.0 if c.met else 0.0)
        yield from (measured, target, met)
        yield GaugeMetricFamily(
            "crcr_level_criteria_pending",
            "1 while the tallies behind the level criteria are still computed",
            value=pending,
        )


def registry() -> CollectorRegistry:
    """Every process's callback counters (multiprocess mode) or this one's, and the figures."""
    found = CollectorRegistry(auto_describe=False)
    if multiprocess():
        MultiProcessCollector(found)
    else:
        found.register(CALLBACK_ANSWERS)
    found.register(RelayCollector())
    found.register(LevelsCollector())
    return found


def exposition(cache_seconds: float) -> bytes:
    """The Prometheus text format, shared for `cache_seconds` across processes (soft cache)."""
    text = soft_get(CACHE_KEY) if cache_seconds > 0 else None
    if text is None:
        text = generate_latest(registry())
        if cache_seconds > 0:
            soft_set(CACHE_KEY, text, cache_seconds)
    return text
