"""Which commit a question is about: the head of a PR that counts, the PR's labels, and what a
SHA prefix names. One answer each, for the pages, the API, the gate, the check runs and the
oncall comment alike (they used to decide four, two and three ways, and could judge different
heads of one PR)."""

from dataclasses import dataclass, field

from django.db.models import Min, Q

from relay.inputs.linear import linear
from relay.models import Delivery, Dispatch, JobRun, PullRequest, UpstreamCommit
from relay.stats.runkinds import trunk_commits

CANDIDATES = 12
"""At most this many commits are listed for a prefix (two already make it ambiguous)."""


# --- the PR a commit belongs to ------------------------------------------------------------------

_PR_IN_TITLE = linear(r"\(#([0-9]{1,9})\)\s*$")


def commit_pr_number(commit: UpstreamCommit | None) -> int | None:
    """A PR head knows its PR; a trunk commit names the PR that landed it at the end of its title,
    "(#123)", as pytorch's merge bot writes it."""
    if commit is None:
        return None
    if commit.pr_number:
        return commit.pr_number
    return landed_pr(commit.title)


def landed_pr(title: str) -> int | None:
    found = _PR_IN_TITLE.search(title or "")
    return int(found.group(1)) if found else None


def landed_commits(number: int, limit: int = 20) -> list[UpstreamCommit]:
    """The trunk commits an upstream PR landed as, newest first: those whose title names it last,
    "(#123)", as the merge bot writes it; whether or not the relay saw the PR's own events (a
    ghstack stack or a direct land sends none)."""
    rows = trunk_commits().filter(title__contains=f"(#{int(number)})")
    return [c for c in rows.order_by("-landed_at", "-id")[:limit] if landed_pr(c.title) == int(number)]


def landed_as(number: int) -> UpstreamCommit | None:
    """The trunk commit an upstream PR landed as (the newest, should it have landed twice)."""
    return next(iter(landed_commits(number)), None)


# --- the PR head that counts ---------------------------------------------------------------------


def pr_head(number: int) -> str:
    """The head of the PR that counts: the newest one a relayed pull_request webhook named, else
    the newest-seen of the heads recorded, dispatched for or reported on (pr_head_shas); "" when
    the relay knows no head of it."""
    webhook = pr_heads_newest([number]).get(number)
    return webhook or next(iter(pr_head_shas(number)), "")


def pr_head_shas(number: int) -> dict[str, object]:
    """Every head SHA the PR has had → when the relay first saw it, newest first: recorded
    commits, plus SHAs known only from webhooks, dispatches or job results (four indexed queries)."""
    seen: dict[str, object] = dict(UpstreamCommit.objects.filter(pr_number=number).values_list("sha", "landed_at"))
    webhooks = Delivery.objects.filter(event="pull_request", outcome=Delivery.Outcome.RELAYED)
    for rows, when in ((JobRun.objects, "created_at"), (Dispatch.objects, "created_at"), (webhooks, "received_at")):
        firsts = rows.filter(pr_number=number).exclude(head_sha="").values("head_sha")
        for row in firsts.annotate(first=Min(when)):
            seen[row["head_sha"]] = min(seen.get(row["head_sha"], row["first"]), row["first"])
    return dict(sorted(seen.items(), key=lambda kv: kv[1], reverse=True))


def pr_heads_newest(pr_numbers) -> dict[int, str]:
    """The newest head SHA a relayed pull_request webhook named, for each PR that has one."""
    rows = Delivery.objects.filter(
        event="pull_request", pr_number__in=set(pr_numbers), outcome=Delivery.Outcome.RELAYED
    ).exclude(head_sha="")
    return dict(rows.order_by("received_at", "id").values_list("pr_number", "head_sha"))


# --- the PR's labels --------------------------------------------------------------------------------

LABEL_PREFIX = "ciflow/crcr/"


def pr_labels(pr_number: int) -> set[str]:
    """Lower-cased label names of the PR (pr_label_names): what the check runs compare."""
    return {name.lower() for name in pr_label_names(pr_number)}


def pr_label_names(pr_number: int) -> list[str]:
    """The PR's labels as the newest pull_request webhook said them (relay.intake.commits keeps the
    PullRequest row to the newest delivery, so out-of-order label events settle on the newest
    one): the one source the check runs, the PR page's chips and its L3 line read."""
    row = PullRequest.objects.filter(number=pr_number).only("labels").first()
    return [str(name) for name in (row.labels if row else []) if isinstance(name, str)]


def device_label(project) -> str:
    """The `ciflow/crcr/<device>` label that asks an L3 backend for check runs on a PR."""
    return f"{LABEL_PREFIX}{project.device}".lower()


# --- a SHA prefix ----------------------------------------------------------------------------------


def sha_prefix_filter(field_name: str, prefix: str) -> Q:
    """A prefix match the (head_sha, …) index can serve: hex SHAs sort below 'g', and LIKE on
    SQLite is case-insensitive so it would scan."""
    prefix = prefix.lower()
    return Q(**{f"{field_name}__gte": prefix, f"{field_name}__lt": prefix + "g"})


@dataclass
class ShaMatch:
    """What a SHA or SHA prefix names: exactly one commit (`sha`, and `commit` when the relay
    recorded it), or none, or several (`candidates`, newest first, and `sha` is None)."""

    sha: str | None
    commit: UpstreamCommit | None = None
    candidates: list[UpstreamCommit] = field(default_factory=list)

    @property
    def ambiguous(self) -> bool:
        return len(self.candidates) > 1


def commits_by_prefix(prefix: str, limit: int = CANDIDATES) -> list[UpstreamCommit]:
    """Recorded commits whose SHA starts with `prefix`, newest first; when none is recorded, the
    SHAs known only from job results, as unsaved commits."""
    commits = list(UpstreamCommit.objects.filter(sha_prefix_filter("sha", prefix)).order_by("-landed_at")[:limit])
    if commits:
        return commits
    shas = JobRun.objects.filter(sha_prefix_filter("head_sha", prefix)).values_list("head_sha", flat=True)
    return [UpstreamCommit(sha=sha) for sha in shas.distinct().order_by("head_sha")[:limit]]


def sha_resolve(prefix: str) -> ShaMatch:
    """A full SHA names itself even when nothing is recorded for it; a shorter prefix names a
    commit only when exactly one matches (newest-wins would silently show the wrong commit)."""
    prefix = prefix.lower()
    candidates = commits_by_prefix(prefix)
    exact = next((c for c in candidates if c.sha == prefix), None)
    if exact is not None or len(prefix) == 40:
        return ShaMatch(prefix, exact if exact is not None and exact.pk else None)
    if len(candidates) == 1:
        only = candidates[0]
        return ShaMatch(only.sha, only if only.pk else None, candidates)
    return ShaMatch(None, None, candidates)
