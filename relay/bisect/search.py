"""The search: one step per decided probe. While the commit known to pass and the one known to
fail are more than one apart, probe the one halfway (a range of k commits is decided in
ceil(log2 k) probes); when they are neighbours, re-run the culprit and its parent together. Only
fail-with and pass-without marks the culprit verified; anything else is not reproducible (no
culprit is named: the suspect is nobody's culprit), and a probe nobody answered ends the bisection as timed out.

Each step is taken under a claim (a conditional UPDATE of the row's lease) and the row's lock,
so a callback's kick and the sweep never both move one bisection; a worker that dies holding
the claim leaves a lease that runs out, and the next sweep takes the step again."""

import logging
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from relay.policy.links import commit_path, pr_path, public_url, short_sha

from ..models import Bisection, BisectProbe, NotificationEvent
from ..notify.events import event_emit
from ..results.bisections import read
from .probes import OverBudget, probe_make, probe_outcome

logger = logging.getLogger(__name__)
State, Outcome, Role = Bisection.State, BisectProbe.Outcome, BisectProbe.Role
LEASE = timedelta(seconds=120)
ENDINGS = {
    Outcome.TIMED_OUT: State.TIMED_OUT,
    Outcome.ERROR: State.INCONCLUSIVE,
    Outcome.UNDELIVERABLE: State.INCONCLUSIVE,
}
"""How a search probe that gave no verdict ends the bisection."""


def bisection_claim(pk: int, now=None) -> bool:
    """Take the running bisection if nobody holds it (or its holder's lease ran out)."""
    now = now or timezone.now()
    free = Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now)
    return bool(Bisection.objects.running().filter(free, pk=pk).update(lease_expires_at=now + LEASE))


def bisection_advance(pk: int) -> str | None:
    """One step of the bisection if it can move (its state after), None when another holds it."""
    if not bisection_claim(pk):
        return None
    try:
        with transaction.atomic():
            bisection = Bisection.objects.select_for_update().select_related("project").get(pk=pk)
            search_step(bisection)
            return bisection.state
    finally:
        Bisection.objects.filter(pk=pk).update(lease_expires_at=None)


def search_step(bisection: Bisection) -> None:
    """Decide the open probes; once none is pending, move the search or the verification on."""
    if any(_decided(probe) == Outcome.PENDING for probe in bisection.probes.filter(outcome=Outcome.PENDING)):
        return
    if bisection.state == State.SEARCHING:
        _search(bisection)
    elif bisection.state == State.VERIFYING:
        _verify(bisection)


def _decided(probe: BisectProbe) -> str:
    outcome = probe_outcome(probe)
    if outcome != Outcome.PENDING:
        probe.outcome, probe.decided_at = outcome, timezone.now()
        probe.save(update_fields=["outcome", "decided_at"])
    return outcome


def _search(bisection: Bisection) -> None:
    last = bisection.probes.filter(role=Role.SEARCH).order_by("-number").first()
    if last is not None and bisection.good_index < last.index < bisection.bad_index:
        if last.outcome in ENDINGS:
            return _end(
                bisection,
                ENDINGS[last.outcome],
                f"probe {last.number} on {short_sha(last.sha)}: {last.get_outcome_display()}",
            )
        if last.outcome == Outcome.FAIL:
            bisection.bad_index = last.index
        else:
            bisection.good_index = last.index
    if bisection.bad_index - bisection.good_index > 1:
        return _probe(bisection, [((bisection.good_index + bisection.bad_index) // 2, Role.SEARCH)])
    bisection.state, bisection.culprit_sha = State.VERIFYING, bisection.span[bisection.bad_index]
    _probe(bisection, [(bisection.bad_index, Role.CULPRIT), (bisection.bad_index - 1, Role.PARENT)])


def _probe(bisection: Bisection, wanted: list[tuple[int, str]]) -> None:
    try:
        for index, role in wanted:
            probe_make(bisection, index, role)
    except OverBudget as exc:
        return _end(bisection, State.OVER_BUDGET, str(exc))
    bisection.save()


def _verify(bisection: Bisection) -> None:
    """The culprit re-run must fail and its parent's pass; the verdict of the latest pair."""
    runs = {probe.role: probe for probe in bisection.probes.exclude(role=Role.SEARCH).order_by("number")}
    culprit, parent = runs.get(Role.CULPRIT), runs.get(Role.PARENT)
    if culprit is None or parent is None:
        return _probe(bisection, [(bisection.bad_index, Role.CULPRIT), (bisection.bad_index - 1, Role.PARENT)])
    if Outcome.TIMED_OUT in (culprit.outcome, parent.outcome):
        return _end(bisection, State.TIMED_OUT, "a verification re-run was not answered (timed out)")
    if (culprit.outcome, parent.outcome) == (Outcome.FAIL, Outcome.PASS):
        return _end(bisection, State.VERIFIED, "fails with the culprit, passes on its parent")
    note = f"re-run: suspect {culprit.get_outcome_display()}, its parent {parent.get_outcome_display()}"
    _end(bisection, State.NOT_REPRODUCIBLE, note)


def _end(bisection: Bisection, state: str, note: str) -> None:
    """The end; a culprit found but not verified stays named, as the suspect it is."""
    bisection.state, bisection.note, bisection.finished_at = state, note[:500], timezone.now()
    bisection.save()
    if state in (State.VERIFIED, State.NOT_REPRODUCIBLE):
        culprit_announce(bisection)
    logger.info("bisection %s of %s ended %s: %s", bisection.pk, bisection.project, state, note)


def culprit_announce(bisection: Bisection) -> None:
    """The backend's oncall (and every subscription that matches) hears what the bisection found,
    in the sentence the pages show, once per bisection. The culprit's upstream PR is named, and
    subscribers beyond the backend's own hear it, only when the backend is one upstream trusts
    (L3/L4, `upstream_trusted`; relay.notify.subscriptions reads it) and the culprit is verified."""
    found = read([bisection])[0]
    project, culprit = bisection.project, bisection.culprit_sha
    lines = [f"{t['test_id']} ({t['job']})" for t in bisection.tests[:20]]
    accuses = found.verified and found.upstream_trusted
    if found.culprit_pr and accuses:
        lines.append(f"landed by PR #{found.culprit_pr}: {public_url(pr_path(found.culprit_pr))}")
    named = culprit if found.verified else bisection.bad_sha
    details = {
        "url": public_url(commit_path(named, project.pk)),
        "lines": [bisection.note, *lines],
        "culprit_sha": culprit if found.verified else None,
        "verified": found.verified,
        "verified_by": found.verified_by,
        "upstream_trusted": accuses,
        "culprit_pr": found.culprit_pr if accuses else None,
        "bisection": public_url(found.api_url),
    }
    event_emit(
        NotificationEvent.Kind.BISECTED,
        f"bisected:{bisection.pk}",
        found.sentence,
        project=project,
        head_sha=named,
        test_ids=[t["test_id"] for t in bisection.tests][:200],
        details=details,
    )
