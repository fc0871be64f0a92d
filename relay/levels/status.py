"""Level decisions for every backend, in the shape of upstream's `level-status` (CONTRACT §6):
L3 and L4 backends against the demotion criteria over 7 days, L2 backends against promotion's over
14 days, both from relay.levels.criteria (the one rule) and with the raw and upstream-adjusted pass rates
(relay.results.excused) side by side, the registry's basis deciding.

A backend with no decided job in its window is listed with noData and never gets a change."""

from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from relay.levels import criteria as rules
from relay.levels.demotion import demotion_pr_summary
from relay.levels.readiness import LevelHistory, backend_readiness, level_history, readiness_inputs
from relay.models import Level, Project
from relay.results.excused import AdjustedRates

CRITERION_NAMES = {
    "e2e": "e2e_p50",
    "timeouts": "timeout_rate",
    "pass_rate": "pass_rate",
    "queue": "queue_time_avg",
    "overrun": "overrun_rate",
    "time_at_level": "tenure_days",
    "data_days": "data_days",
}
"""Units of `measured` and `target`: seconds for times, fractions (0–1) for rates, days for tenure."""


@dataclass
class RepoStatus:
    project: Project
    change: str | None
    no_data: bool
    window_days: int
    criteria: list
    adjusted: AdjustedRates
    history: LevelHistory

    def as_dict(self) -> dict:
        return {
            "repo": self.project.full_name,
            "level": self.project.level,
            "change": self.change,
            "noData": self.no_data,
            "windowDays": self.window_days,
            "criteria": [self._criterion(c) for c in self.criteria],
            "passRate": self._pass_rates(),
            "levelSince": self.history.level_since,
            "reportingSince": self.history.reporting_since,
            "demotionPr": demotion_pr_summary(self.project),
        }

    def _criterion(self, c) -> dict:
        item = {"criterion": CRITERION_NAMES[c.key], "measured": c.measured, "target": c.target, "met": c.met}
        if c.key == "pass_rate":
            item.update(self._rates())
        return item

    def _rates(self) -> dict:
        return {
            "raw": self.adjusted.raw_pass_rate,
            "adjusted": self.adjusted.adjusted_pass_rate,
            "decidedBy": self.project.level_pass_rate,
        }

    def _pass_rates(self) -> dict:
        return {
            **self._rates(),
            "jobs": self.adjusted.raw.decided,
            "passed": self.adjusted.raw.passed,
            "excused": [excused_dict(e) for e in self.adjusted.excused],
        }


def excused_dict(excused) -> dict:
    return {
        "sha": excused.sha,
        "jobId": excused.job_id,
        "job": excused.job,
        "reason": excused.reason,
        "evidence": [{"kind": e.kind, "label": e.label, "url": e.url} for e in excused.evidence],
    }


def repo_status(project: Project, now: datetime, listed: bool = True) -> RepoStatus:
    """`listed`: the excused failures as a list, else their stored counts (readiness_inputs)."""
    inputs = readiness_inputs(project, now, listed)
    readiness = backend_readiness(project, now, inputs)
    if project.level == Level.L2:
        return _decided(
            project, readiness, rules.PROMOTION_DAYS, readiness.promotion, inputs.tally14, inputs.adjusted14
        )
    return _decided(project, readiness, rules.DEMOTION_DAYS, readiness.demotion, inputs.tally7, inputs.adjusted7)


def _decided(project, readiness, days: int, criteria: list, tally, adjusted) -> RepoStatus:
    """The change is readiness's (relay.levels.criteria.level_change): the page and this API never differ."""
    no_data = tally.rates.decided == 0
    change = None if no_data else readiness.change
    return RepoStatus(project, change, no_data, days, criteria, adjusted, level_history(project, limit=0))


def level_status(now: datetime | None = None) -> list[RepoStatus]:
    """Every active backend at L2–L4 (not the reference, not the health probe), by name."""
    now = now or timezone.now()
    projects = Project.objects.filter(active=True, is_reference=False, is_health_probe=False)
    projects = projects.exclude(level=Level.L1).order_by("full_name")
    return [repo_status(p, now) for p in projects]
