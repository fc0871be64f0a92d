"""What the PR page and GET /api/v1/prs/<number> say of one upstream PR, answered here: its heads
(the one that counts first, as the gate judges it), its facts as the newest webhook told them
(title, author, labels, base: the PullRequest row, the labels' one source), the L3 backends its
labels ask for check runs, the gate's verdict as shown, and for the latest head "did this PR
break a backend?" (relay.results.blame). The HUD adds only the grid of heads × backends."""

from dataclasses import dataclass, field

from relay.models import Level, Project, PullRequest, UpstreamCommit

from .blame import BackendBlame, pr_blame
from .gate import gate_shown
from .heads import device_label, landed_as, pr_head, pr_head_shas, pr_label_names


@dataclass
class PrHead:
    sha: str
    first_seen: object
    commit: UpstreamCommit | None
    row: object = None
    """The HUD's grid row of this head, filled in by the page."""


@dataclass
class PrFacts:
    number: int
    heads: list[PrHead]
    """Newest first, the head that counts (relay.results.heads.pr_head) leading."""
    info: PullRequest | None = None
    title: str = ""
    labels: list[str] = field(default_factory=list)
    l3_labelled: list[Project] = field(default_factory=list)
    """L3 backends whose `ciflow/crcr/<device>` label the PR carries, as the check runs follow them."""
    gate: dict | None = None
    blame: list[BackendBlame] = field(default_factory=list)
    landed: UpstreamCommit | None = None
    """The trunk commit the PR landed as (relay.results.heads.landed_as), when it landed."""


def pr_facts(number: int, projects: list[Project]) -> PrFacts:
    heads, landed = heads_of_pr(number), landed_as(number)
    if not heads:
        return PrFacts(number, [], title=landed.title if landed else "", landed=landed)
    info = PullRequest.objects.filter(number=number).first()
    labels = pr_label_names(number)
    return PrFacts(
        number,
        heads,
        info,
        (info.title if info else "") or next((h.commit.title for h in heads if h.commit and h.commit.title), ""),
        labels,
        labelled_backends(labels, projects),
        _gate(number, heads[0].sha, projects),
        pr_blame(heads[0].sha, info, projects),
        landed,
    )


def heads_of_pr(number: int) -> list[PrHead]:
    """Every head SHA the PR has had, newest first, the head that counts leading: a PR pushed back
    to an older SHA is judged on that SHA, as the gate judges it."""
    seen = pr_head_shas(number)
    commits = UpstreamCommit.objects.in_bulk(list(seen), field_name="sha")
    heads = [PrHead(sha, when, commits.get(sha)) for sha, when in seen.items()]
    counted = pr_head(number) if heads else ""
    return sorted(heads, key=lambda head: head.sha != counted)


def labelled_backends(labels: list[str], projects: list[Project]) -> list[Project]:
    names = {label.lower() for label in labels}
    return [p for p in projects if p.level == Level.L3 and p.device and device_label(p) in names]


def _gate(number: int, head_sha: str, projects: list[Project]) -> dict | None:
    """The gate when an L4 project exists: the health probe's label-gated L4 check counts in the
    gate too, though it has no column among the backends."""
    gates = any(p.level == Level.L4 for p in projects) or Project.objects.filter(level=Level.L4, active=True).exists()
    return gate_shown(number, head_sha) if gates else None
