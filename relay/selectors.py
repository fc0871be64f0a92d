"""Reads of what the relay recorded, for its own pages, the merge gate and the API."""

from dataclasses import dataclass

from django.core.paginator import Paginator
from django.db.models import Count, Prefetch, Q

from relay.stats.runkinds import trunk_commits

from .github.installations import installed_names
from .models import Delivery, Dispatch, JobRun, Project, UpstreamCommit

__all__ = [
    "STATUS_FILTERS",
    "DeliveryFilters",
    "active_project",
    "deliveries_page",
    "delivery_event_choices",
    "installed_names",
    "trunk_commit",
]

DELIVERIES_PER_PAGE = 50
STATUS_FILTERS = {
    "relayed": Q(outcome=Delivery.Outcome.RELAYED),
    "recorded": Q(outcome=Delivery.Outcome.RECORDED),
    "ignored": Q(outcome=Delivery.Outcome.IGNORED),
    "failing": Q(dispatches__state__in=[Dispatch.State.FAILED, Dispatch.State.RETRYING]),
    "unsent": Q(dispatches__state__in=[Dispatch.State.PENDING, Dispatch.State.SENDING, Dispatch.State.RETRYING]),
}


@dataclass(frozen=True)
class DeliveryFilters:
    event: str = ""
    action: str = ""
    status: str = ""

    @classmethod
    def from_query(cls, query) -> "DeliveryFilters":
        status = query.get("status", "")
        return cls(
            event=query.get("event", "")[:64],
            action=query.get("action", "")[:64],
            status=status if status in STATUS_FILTERS else "",
        )


def deliveries_page(filters: DeliveryFilters, page: int):
    qs = Delivery.objects.defer("payload")
    if filters.event:
        qs = qs.filter(event=filters.event)
    if filters.action:
        qs = qs.filter(action=filters.action)
    if filters.status:
        qs = qs.filter(STATUS_FILTERS[filters.status]).distinct()
    qs = qs.annotate(
        dispatch_total=Count("dispatches", distinct=True),
        dispatch_sent=Count("dispatches", filter=Q(dispatches__state=Dispatch.State.SENT), distinct=True),
    ).prefetch_related(
        Prefetch(
            "dispatches",
            queryset=Dispatch.objects.select_related("project")
            .prefetch_related("attempt_log")
            .order_by("project__full_name"),
        )
    )
    return Paginator(qs.order_by("-received_at", "-id"), DELIVERIES_PER_PAGE).get_page(page)


def delivery_event_choices() -> dict[str, list[str]]:
    rows = Delivery.objects.values_list("event", "action").distinct().order_by("event", "action")
    choices: dict[str, list[str]] = {}
    for event, action in rows:
        choices.setdefault(event, []).append(action)
    return choices


def activity_counts() -> dict[str, int]:
    """Running totals `make run` turns into its once-a-minute summary: webhooks received,
    dispatches sent, callbacks accepted (a job reporting it started or finished), failures (dispatches
    given up on), and results (jobs that finished)."""
    jobs = JobRun.objects.aggregate(
        started=Count("id", filter=Q(in_progress_at__isnull=False)),
        finished=Count("id", filter=Q(status=JobRun.Status.COMPLETED)),
    )
    return {
        "webhooks": Delivery.objects.count(),
        "dispatches": Dispatch.objects.filter(state=Dispatch.State.SENT).count(),
        "callbacks": jobs["started"] + jobs["finished"],
        "failures": Dispatch.objects.filter(state=Dispatch.State.FAILED).count(),
        "results": jobs["finished"],
    }


def trunk_commit(sha: str) -> UpstreamCommit | None:
    return trunk_commits().filter(sha=sha.lower()).first()


def active_project(full_name: str) -> Project | None:
    return (
        Project.objects.filter(full_name__iexact=full_name.strip(), active=True).first() if full_name.strip() else None
    )
