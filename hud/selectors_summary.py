"""/crcr, the global summary: backends by level with their windowed tallies (relay.tallies), and
the relay's health cards (hud.health)."""

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from hud.health import dispatch_states, health_cards
from hud.templatetags.hud_tags import ago, duration, percent
from relay.health.alerts import AlertStatus, alert_statuses
from relay.levels.criteria import pass_rate_met
from relay.levels.status import repo_status
from relay.models import Level, Project
from relay.ops.cache import soft_get, soft_set
from relay.policy.verdicts import Rates
from relay.results.excused import AdjustedRates
from relay.stats.windows import WINDOWS, Window, stale_after
from relay.tallies.buckets import window_buckets
from relay.tallies.excused import window_excused
from relay.tallies.rollups import rollups_state, window_tallies
from relay.tallies.tally import Tally

# --- the summary page ---------------------------------------------------------------------------------

LEVEL_SECTIONS = [
    (Level.L4, "L4 backends · merge-gating check runs on every PR"),
    (Level.L3, "L3 backends · check runs on PRs labelled ciflow/crcr/<device>"),
    (Level.L2, "L2 backends · results on the HUD only"),
    (Level.L1, "L1 integrations · webhook dispatch only, no results"),
]


@dataclass(frozen=True)
class ReadinessChip:
    """Upstream's overview chip: an L2 backend's promotion criteria met, an L3/L4 backend's
    demotion criteria at risk, or no data (relay.levels.status decides, as the level loop does)."""

    label: str
    """Promotion | Demotion."""
    counted: int
    total: int
    no_data: bool
    tone: str
    """ok | bad | neutral: colour, always beside the words."""
    judged: bool = True
    """False when every criterion is unjudged (too thin a sample): nothing is met or at risk yet."""

    @property
    def text(self) -> str:
        if self.no_data:
            return f"{self.label}: no data"
        if not self.judged:
            return f"{self.label}: not enough data yet"
        return f"{self.label}: {self.counted}/{self.total} " + ("met" if self.label == "Promotion" else "at risk")


def readiness_chip(status) -> ReadinessChip:
    """The counts are the criteria's; the tone is the one level_change rule's (status.change), so the
    chip turns red exactly when the level-status API and the loop say demote."""
    criteria = status.criteria
    judged = any(c.met is not None for c in criteria)
    if status.project.level == Level.L2:
        met = sum(c.met is True for c in criteria)
        tone = "ok" if status.change == "promote" else "neutral"
        return ReadinessChip("Promotion", met, len(criteria), status.no_data, tone, judged)
    at_risk = sum(c.met is False for c in criteria)
    tone = "neutral" if status.no_data or not judged else ("bad" if status.change == "demote" else "ok")
    return ReadinessChip("Demotion", at_risk, len(criteria), status.no_data, tone, judged)


CHIP_SECONDS = 60
"""A backend's chip is shared this long: it reads 7- and 14-day windows that barely move in a minute."""


def backend_chip(project: Project, now: datetime) -> ReadinessChip:
    key = f"hud:readiness-chip:v2:{project.pk}:{project.level}"
    chip = soft_get(key)
    if chip is None:
        chip = readiness_chip(repo_status(project, now, listed=False))  # counts, as the rows read them
        soft_set(key, chip, CHIP_SECONDS)
    return chip


@dataclass
class BackendRow:
    project: Project
    tally: Tally
    activity: str
    activity_text: str
    last_result_at: datetime | None
    last_result_text: str
    chip: ReadinessChip | None = None
    """The level criteria at a glance (L2: promotion, L3/L4: demotion)."""
    adjusted: AdjustedRates | None = None
    """The upstream-adjusted pass rate on the PR tab (the rule judges PR and push jobs only): the
    excused count from stored rollups (relay.tallies.excused); the list is on the backend page."""

    @property
    def rates(self) -> Rates:
        return self.tally.rates

    @property
    def pass_rate_ok(self) -> bool | None:
        return pass_rate_met(self.rates.pass_rate)

    @property
    def adjusted_ok(self) -> bool | None:
        return pass_rate_met(self.adjusted.adjusted_pass_rate) if self.adjusted else None

    @property
    def adjusted_text(self) -> str:
        return percent(self.adjusted.adjusted_pass_rate) if self.adjusted else ""

    @property
    def pass_rate_text(self) -> str:
        return percent(self.rates.pass_rate)

    @property
    def first_attempt_text(self) -> str:
        return percent(self.rates.first_attempt_pass_rate)

    @property
    def timings(self) -> dict:
        t = self.tally
        return {
            "queue_avg": duration(t.queue.mean),
            "queue_p90": duration(t.queue.quantile(0.9)),
            "exec_avg": duration(t.execution.mean),
            "exec_p90": duration(t.execution.quantile(0.9)),
        }


@dataclass
class L1Chip:
    project: Project
    dispatched: int
    not_installed: int
    failed: int


@dataclass
class LevelSection:
    level: str
    title: str
    rows: list = field(default_factory=list)
    chips: list = field(default_factory=list)


@dataclass
class Summary:
    window: Window
    tab: str
    now: datetime
    sections: list
    cards: list
    registered: Counter
    probe: Project | None
    alerts: list[AlertStatus] = field(default_factory=list)
    """The relay's health alerts as their last evaluation left them (relay/health/alerts.py)."""

    @property
    def alerts_firing(self) -> int:
        return sum(a.state == "firing" for a in self.alerts)

    @property
    def has_backends(self) -> bool:
        return any(s.rows or s.chips for s in self.sections)

    @property
    def registered_total(self) -> int:
        return sum(self.registered.values())

    @property
    def registered_text(self) -> str:
        return (
            " · ".join(f"{self.registered[level]} {level}" for level, _ in LEVEL_SECTIONS if self.registered[level])
            or "none"
        )


def summary_build(window_key: str, tab: str, now: datetime | None = None) -> Summary:
    now = now or timezone.now()
    window = WINDOWS[window_key]
    tallies = window_tallies(window.days, now)
    projects = list(Project.objects.filter(active=True).order_by("position", "full_name"))
    probe = next((p for p in projects if p.is_health_probe), None)
    products = [
        p for p in projects if not (p.is_health_probe or p.is_reference)
    ]  # the reference is a source, not ranked
    since = window_buckets(window.days, now)[0].start
    excused = window_excused(since, now, rollups_state().generation) if tab == "pr" else None
    sections = _sections_build([p for p in products if in_tab(p, tab)], tallies, window, tab, since, now, excused)
    alerts = alert_statuses()
    cards = health_cards(tallies, probe, window, tab, since, now)
    return Summary(window, tab, now, sections, cards, Counter(p.level for p in products), probe, alerts)


def in_tab(project: Project, tab: str) -> bool:
    """A repo's allowlist `events` decide which tab lists it: a nightly-only repo is no empty row
    among the pull requests, and a PR-only one none among the nightlies (test-infra #8856)."""
    if tab == "periodic":
        return True
    return project.takes_part_in("pull_request" if tab == "pr" else "nightly")


def _sections_build(products, tallies, window, tab, since, now, excused) -> list[LevelSection]:
    dispatches = _dispatch_counts([p.pk for p in products if p.level == Level.L1], since)
    sections = []
    for level, title in LEVEL_SECTIONS:
        section = LevelSection(level, title)
        for project in (p for p in products if p.level == level):
            if level == Level.L1:
                counts = dispatches.get(project.pk, Counter())
                section.chips.append(L1Chip(project, counts["sent"], counts["not_installed"], counts["failed"]))
            else:
                row = backend_row(project, tallies.get((project.pk, tab)) or Tally(), stale_after(window, tab), now)
                if excused is not None:
                    row.adjusted = AdjustedRates(row.rates, stored=excused[project.pk])
                row.chip = backend_chip(project, now)
                section.rows.append(row)
        section.rows.sort(key=_worst_first)
        if section.rows or section.chips:
            sections.append(section)
    return sections


def _worst_first(row: BackendRow):
    rate = row.rates.pass_rate
    return (rate is None, rate if rate is not None else 0.0, row.project.full_name.lower())


def backend_row(project: Project, tally: Tally, stale: timedelta, now: datetime) -> BackendRow:
    last = tally.last_result_at
    if last is None:
        activity, text = "no_data", "No data: no result in this window"
    elif now - last > stale:
        activity, text = (
            "stale",
            f"Stale: no result for {duration((now - last).total_seconds())} (threshold {duration(stale.total_seconds())})",
        )
    else:
        activity, text = "active", f"Active: last result {ago(last, now)}"
    return BackendRow(project, tally, activity, text, last, ago(last, now) if last else "none in window")


def _dispatch_counts(project_ids: list, since: datetime) -> dict:
    """{project_id: Counter(state)} for L1 backends, shared for a minute (hud.health.dispatch_states)."""
    counts: dict = {}
    for (project_id, state), n in dispatch_states(since).items():
        if project_id in project_ids:
            counts.setdefault(project_id, Counter())[state] += n
    return counts
