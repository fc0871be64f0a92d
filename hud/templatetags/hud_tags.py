"""Template helpers for every HUD page, and the one place durations, rates and "ago" are
formatted (selectors that compose a sentence call these same functions).

Everything that comes from downstream callbacks (job and test names, URLs, messages) is data:
it reaches HTML only through Django's escaping, and URLs become links only when they are http(s)."""

import re
from datetime import datetime, timedelta
from urllib.parse import quote, urlsplit

from django import template
from django.conf import settings
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import mark_safe

from hud import paging
from relay.policy import links
from relay.policy.run_links import github_job_id
from relay.policy.verdicts import STATES, State, conclusion_state, name_shown
from relay.results.advice import advice_for
from relay.results.baseline import EXPECTED, MARK_GLYPHS, MARK_LABELS, MARK_SHORT
from relay.results.bisections import probes_said
from relay.results.status import LEGEND, TESTS_SOURCES
from relay.results.tests import heals_after

register = template.Library()
COMMIT_SHA = re.compile(r"[0-9a-fA-F]{7,40}", re.ASCII)
VARIANT_ONLY_GLYPH = "¹"
"""Beside a failing cell's mark: it fails on one hardware variant of several (the title names it)."""


@register.inclusion_tag("hud/_legend.html")
def hud_legend(show_marks: bool = True, show_probes: bool = False):
    """The cells' legend; `show_probes` where grid cells can show bisection probes (the grids)."""
    marks = [(key, MARK_GLYPHS[key], label) for key, label in MARK_LABELS.items()]
    return {
        "legend": LEGEND,
        "marks": marks if show_marks else [],
        "expected": EXPECTED,
        "probes": show_probes,
        "variant_only": VARIANT_ONLY_GLYPH,
    }


OUTCOME_LABELS = {"failed": "failed", "error": "error", "xpassed": "unexpected success", "xfailed": "expected failure"}


@register.filter
def outcome_label(outcome: str) -> str:
    """A failing test's outcome in words (relay.models.TestOutcome): error, unexpected success."""
    return OUTCOME_LABELS.get(outcome or "", outcome or "")


@register.filter
def failing_counts(job) -> str:
    """ "3 failed, 1 error, 1 xpassed": the counts that make a job's tests red, each named."""
    counts = [
        (getattr(job, "tests_failed", None), "failed"),
        (getattr(job, "tests_error", None), "error"),
        (getattr(job, "tests_xpassed", None), "xpassed"),
    ]
    return ", ".join(f"{n} {word}" for n, word in counts if n)


@register.filter
def http_url(value) -> str:
    """The URL when it is http(s) with a host, else "" (no javascript:, data:, relative tricks)."""
    text = str(value or "").strip()
    try:
        parts = urlsplit(text)
    except ValueError:
        return ""
    return text if parts.scheme in ("http", "https") and parts.netloc else ""


@register.filter
def advice(job, pr_number=None):
    """The job attempt's triage verdict as advice (relay.results.advice), or None; `pr_number` is
    the page's PR for a job that has none of its own."""
    return advice_for(job, pr_number if isinstance(pr_number, int) else None)


@register.filter
def job_log_url(job) -> str:
    """The job's page on GitHub Actions when its job id (workflow.job_id, or a numeric check-run
    id) is known, else the run URL as the provider reported it."""
    run = http_url(getattr(job, "workflow_url", ""))
    job_id = github_job_id(job)
    if run and job_id and "/actions/runs/" in run:
        return f"{run.rstrip('/')}/job/{job_id}"
    return run


@register.filter
def tests_source(value) -> str:
    """Where a job's per-test results came from ("" for a callback's own report)."""
    return TESTS_SOURCES.get(value, "")


@register.filter
def duration(seconds: float | None) -> str:
    """42 s, 3.5 m, 1.2 h, 2.0 d; "–" when unknown. The one way the HUD writes a duration."""
    if seconds is None:
        return "–"
    seconds = float(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


@register.filter
def percent(rate: float | None) -> str:
    """0.953 → "95.3 %"; "–" when there is nothing to divide."""
    return "–" if rate is None else f"{rate * 100:.1f} %"


@register.filter
def ago(moment: datetime | None, now: datetime | None = None) -> str:
    """How long ago, coarsely: "just now", "12 min ago", "5 h ago", "3 d ago"; "never"."""
    if moment is None:
        return "never"
    seconds = max(0.0, ((now or timezone.now()) - moment).total_seconds())
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min ago"
    return f"{seconds / 3600:.0f} h ago" if seconds < 2 * 86400 else f"{seconds / 86400:.0f} d ago"


@register.filter
def job_duration(job):
    """Relay-measured execution time, else the downstream's own start/end."""
    if getattr(job, "execution_seconds", None) is not None:
        return job.execution_seconds
    start, end = getattr(job, "reported_started_at", None), getattr(job, "reported_completed_at", None)
    return (end - start).total_seconds() if start and end else None


@register.filter
def mark_glyph(mark) -> str:
    return MARK_GLYPHS.get(mark or "", "")


@register.filter
def mark_label(mark) -> str:
    return MARK_LABELS.get(mark or "", "")


@register.filter
def commit_path(sha) -> str:
    """The commit page of `sha`, or "#" for a stored value that is no SHA: one odd row (or a
    hostile `?sha=`) renders as a dead link instead of failing the page's URL reversal."""
    sha = str(sha or "")
    return links.commit_path(sha) if COMMIT_SHA.fullmatch(sha) else "#"


@register.filter
def gh_commit(sha) -> str:
    return f"https://github.com/{settings.CRCR_UPSTREAM_REPO}/commit/{quote(str(sha or ''))}"


@register.filter
def gh_pr(number) -> str:
    return f"https://github.com/{settings.CRCR_UPSTREAM_REPO}/pull/{int(number)}"


@register.filter
def gh_repo(full_name) -> str:
    return f"https://github.com/{quote(str(full_name or ''), safe='/')}"


@register.filter
def compact_time(value) -> str:
    """ "10:48" today, "Mon 10:48" this week, "12-02 10:48" before (UTC)."""
    if not value:
        return ""
    now, value = timezone.now(), timezone.localtime(value)
    if value.date() == timezone.localtime(now).date():
        return value.strftime("%H:%M")
    if now - value < timedelta(days=6):
        return value.strftime("%a %H:%M")
    return value.strftime("%m-%d %H:%M")


@register.filter
def tristate(value, words: str = "yes,no,unknown") -> str:
    yes, no, unknown = words.split(",")
    return unknown if value is None else yes if value else no


@register.simple_tag
def grid_cells(row) -> str:
    """A row's cells. The densest markup on the page, built in Python from internal values only
    (state names, glyphs, ids); a cache keyed on what varies keeps a 2,000-cell page cheap."""
    return mark_safe(
        "".join(
            _cell_html(cell.state, cell.mark, cell.project_id, cell.job is not None, cell.variant_only)
            if not cell.probe
            else _probed_cell_html(cell)
            for cell in row.cells
        )
    )


_CELL_CACHE: dict[tuple, str] = {}
PROBE_GLYPHS = {"fail": "✗", "pass": "✓"}


def _cell_html(state, mark, project_id: int, is_job: bool, variant: str = "") -> str:
    key = (state, mark, project_id, is_job, variant)
    html = _CELL_CACHE.get(key)
    if html is None:
        html = _CELL_CACHE[key] = _render_cell(state, mark, project_id, is_job, variant)
    return html


def _probed_cell_html(cell) -> str:
    """A cell no counted run tested where bisection probes ran: their reading as its mark, their
    words (relay.results.bisections.probes_said) as its title. Rare: built each time."""
    title = f"{STATES[cell.state].label} · bisection probes only: {cell.probes_said}"
    mark = f'<i class="mk mk-probe_{escape(cell.probe)}" aria-hidden="true">{PROBE_GLYPHS[cell.probe]}</i>'
    return (
        f'<td class="c s-{escape(cell.state.value)} probed" data-p="{int(cell.project_id)}" tabindex="-1" '
        f'title="{escape(title)}" aria-label="{escape(title)}"><b>{escape(STATES[cell.state].glyph)}</b>{mark}</td>'
    )


def _render_cell(state, mark, project_id: int, is_job: bool, variant: str = "") -> str:
    info = STATES[state]
    title = (
        info.label + (f" · {MARK_LABELS[mark]}" if mark else "") + (f" · fails on {variant} only" if variant else "")
    )
    mark_html = f'<i class="mk mk-{escape(mark)}" aria-hidden="true">{escape(MARK_GLYPHS[mark])}</i>' if mark else ""
    mark_html += f'<i class="vo" aria-hidden="true">{VARIANT_ONLY_GLYPH}</i>' if variant else ""
    css = f"c s-{escape(state.value)}" + (" j" if is_job else "") + (" xp" if mark == EXPECTED else "")
    return (
        f'<td class="{css}" data-p="{int(project_id)}" tabindex="-1" title="{escape(title)}" aria-label="{escape(title)}">'
        f"<b>{escape(info.glyph)}</b>{mark_html}</td>"
    )


@register.filter(name="probes_said")
def probes_said_filter(probes) -> str:
    """A backend's bisection probes on one commit in words (relay.results.bisections.probes_said)."""
    return probes_said(probes)


@register.filter
def state_glyph(state) -> str:
    return STATES[state].glyph


@register.filter
def attempt_glyph(job) -> str:
    """One attempt on its own (the status policy's conclusion_state)."""
    return STATES[conclusion_state(job)].glyph


@register.filter
def state_label(state) -> str:
    """The policy's words for a state (a State or its value)."""
    try:
        return STATES[State(state)].label
    except ValueError:
        return str(state)


@register.filter
def test_url(test_id) -> str:
    """The test page of a test id (relay.policy.testids' identity), URL-encoded whole (its brackets,
    slashes and spaces included)."""
    return links.test_path(str(test_id or "").strip())


@register.filter
def shown(name) -> str:
    """A job's or workflow's name without Buildkite's `:emoji:` shortcodes (relay.policy.verdicts.name_shown)."""
    return name_shown(name)


@register.simple_tag
def healed_after() -> int:
    """The clean passes in a row that heal a flaky or broken test (relay.results.tests)."""
    return heals_after()


@register.filter
def short_sha(sha) -> str:
    """A commit named short, at the one length (relay.policy.links.SHORT_SHA)."""
    return links.short_sha(str(sha or ""))


@register.filter
def backend_url(full_name) -> str:
    """The backend dashboard of owner/repo."""
    return links.backend_path(str(full_name))


@register.filter
def first_n(items, limit) -> list:
    return list(items)[: int(limit or 0) or None]


@register.filter
def beyond(items, limit) -> int:
    """How many items a `first_n` of the same limit leaves out."""
    return max(0, len(items) - int(limit)) if limit else 0


@register.filter
def mark_short(mark) -> str:
    return MARK_SHORT.get(mark or "", "")


@register.filter
def page_of(items, page):
    """The slice of a list of tests one page renders (hud.paging)."""
    return paging.page_of(items or [], page if isinstance(page, int) else 1)


@register.inclusion_tag("hud/_tests_pager.html", takes_context=True)
def tests_pager(context, items):
    """A list's previous/next links when it is longer than a page, every other parameter kept."""
    request, page = context.get("request"), context.get("tests_page")
    if request is None or not isinstance(page, int):
        return {"pager": None}
    return {"pager": paging.pager(request.GET, len(items or []), page)}
