"""Stored excused counts: how many failed PR/push jobs per backend and UTC hour the excused-jobs rule
(relay.results.excused) excuses as upstream's, so /crcr shows the upstream-adjusted pass rate for
every range without running the rule over 90 days on a request.

The counts are the rule's own answer: an hour's count is the number of jobs `excused_jobs` returns
for a span of hours, bucketed by the hour of each job's first attempt (the hour the tallies count it
in). The tally refresh (relay.tallies.rollups) recounts every hour it recomputes, in the same run, so
tallies and counts never describe different data. What else can change a job's excuse, and how the
refresh notices it:

* a later reference result on the same commit (the usual case: OpenReg reports after the backend):
  the refresh treats a changed reference row as a change to every backend's rows on that commit;
* a job's own rows, its triage verdict included (written with the callback, so `updated_at`), are
  the tallies' own changes;
* a known issue opened, edited or closed, a test muted, extended or lifted (its audit rows), or a
  registry change (level, reference, the per-project
  `excuse_triage_verdicts`): the refresh fingerprints them (`excused_facts`) and, when the
  fingerprint moves, recomputes every hour of the longest range (90 days), within its budget like
  any pending hour. That is rare and costs one full recomputation of the range.

The current hour is counted on request (cached a minute), as the tallies' current hour is.
"""

import hashlib
from collections import Counter
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Count, Max, Sum

from relay.models import ExcusedRollup, KnownIssue, Level, Project, TestMuteEvent
from relay.ops.cache import soft_get, soft_set
from relay.results.excused import excused_jobs, projects_with_failures
from relay.tallies.buckets import _floor_hour

HOUR = timedelta(hours=1)
HORIZON = timedelta(days=90)
"""The longest range /crcr offers: what a fingerprint change recomputes."""
SPAN_HOURS = 24
"""Hours judged by one call of the rule: bounds the commits it loads at once."""
LIVE_CACHE_SECONDS = 60
STORED_CACHE_SECONDS = 300


# --- writing ---------------------------------------------------------------------------------------


def excused_hours_store(hours) -> None:
    """Recount these hours for every backend the rule judges (one rule call per backend with a
    failure in the span)."""
    projects = _judged()
    for span in _spans(sorted(hours)):
        start, end = span[0], span[-1] + HOUR
        counts = Counter()
        for project in _failing(projects, start, end):
            for job in excused_jobs(project, start, end):
                counts[(_floor_hour(job.dated), project.pk)] += 1
        _rows_replace(span, counts)


def _judged() -> list[Project]:
    """The rule excuses nothing for L1 backends or the reference: no call for them."""
    return list(Project.objects.exclude(level=Level.L1).exclude(pk__in=Project.objects.references()))


def _failing(projects: list, since: datetime, until: datetime | None = None) -> list:
    ids = projects_with_failures(since, until) if projects else set()
    return [p for p in projects if p.pk in ids]


def _spans(hours: list) -> list[list]:
    """Runs of consecutive hours, at most SPAN_HOURS long."""
    spans: list[list] = []
    for hour in hours:
        if spans and hour - spans[-1][-1] == HOUR and len(spans[-1]) < SPAN_HOURS:
            spans[-1].append(hour)
        else:
            spans.append([hour])
    return spans


def _rows_replace(span: list, counts: Counter) -> None:
    rows = [ExcusedRollup(start=hour, project_id=pid, excused=n) for (hour, pid), n in counts.items() if hour in span]
    with transaction.atomic():
        ExcusedRollup.objects.filter(start__in=span).delete()
        ExcusedRollup.objects.bulk_create(rows)


def excused_facts() -> str:
    """What an excuse depends on beyond job rows: the known issues, the mutes' audit and the
    registry's judged fields."""
    issues = KnownIssue.objects.aggregate(Max("updated_at"), Count("id"))
    mutes = TestMuteEvent.objects.aggregate(Max("id"))
    projects = Project.objects.order_by("pk").values_list("pk", "level", "is_reference", "excuse_triage_verdicts")
    facts = f"{issues}:{mutes}:{list(projects)}"
    return hashlib.sha256(facts.encode()).hexdigest()[:40]


# --- reading ---------------------------------------------------------------------------------------


def window_excused(since: datetime, now: datetime, generation: int) -> Counter:
    """{project_id: excused jobs dated in [since, now)}: stored hours (cached per refresh
    generation) plus the current hour counted here (cached a minute)."""
    current = _floor_hour(now)
    key = f"hud:excused:v1:{generation}:{since:%Y%m%d%H}:{current:%Y%m%d%H}"
    stored = soft_get(key)
    if stored is None:
        rows = ExcusedRollup.objects.filter(start__gte=since, start__lt=current).values("project_id")
        stored = dict(rows.annotate(n=Sum("excused")).values_list("project_id", "n"))
        soft_set(key, stored, STORED_CACHE_SECONDS)
    return Counter(stored) + current_hour_excused(current)


def current_hour_excused(current: datetime) -> Counter:
    key = f"hud:excused:live:v1:{current:%Y%m%d%H}"
    counts = soft_get(key)
    if counts is None:
        counts = Counter({p.pk: len(excused_jobs(p, current)) for p in _failing(_judged(), current)})
        soft_set(key, counts, LIVE_CACHE_SECONDS)
    return counts
