"""Reads for the causes pages and the causes sections of the backend, commit and PR pages:
relay.results.causes shaped for templates, with the known issues whose cause rule names each
cause and the trend figure."""

from dataclasses import dataclass

from relay.inputs.linear import linear
from relay.inputs.params import int_param
from relay.models import CauseIssue, FailureCause, KnownIssue, Project
from relay.results.causes import (
    DEFAULT_DAYS,
    KINDS,
    MAX_DAYS,
    CauseQuery,
    cause_found,
    causes_listed,
    commit_causes,
    missing_operators,
)

from .charts import cause_trend_figure
from .patterns import FilterError

BACKEND_CAUSES_SHOWN = 8
FILTERS = ("backend", "kind", "sha", "operator", "shared", "days", "limit")
_SHA = linear(r"[0-9a-f]{40}")
_OPERATOR = linear(r"[A-Za-z_]\w*::[\w.]{1,190}")


def cause_query(params) -> CauseQuery:
    """The one reading of the causes filters (the /causes page and GET /api/v1/causes)."""
    unknown = sorted(set(params) - {*FILTERS, "format"})
    if unknown:
        raise FilterError(f"unknown filter {', '.join(unknown)[:200]}; this list filters by {', '.join(FILTERS)}")
    fields = {}
    if params.get("backend"):
        project = Project.objects.filter(full_name__iexact=params["backend"][:140]).first()
        if project is None:
            raise FilterError("backend: not a registered owner/repo")
        fields["project_ids"] = (project.pk,)
    if params.get("kind"):
        fields["kind"] = _checked(params["kind"], params["kind"] in KINDS, f"kind: one of {', '.join(KINDS)}")
    if params.get("sha"):
        sha = params["sha"].lower()
        fields["sha"] = _checked(sha, _SHA.fullmatch(sha) is not None, "sha: a full 40-hex commit")
    if params.get("operator"):
        op = params["operator"]
        fields["operator"] = _checked(op, _OPERATOR.fullmatch(op) is not None, "operator: namespace::name")
    if params.get("shared"):
        shared = {"yes": True, "no": False}.get(params["shared"])
        fields["shared"] = _checked(shared, shared is not None, "shared: yes or no")
    for name, high in (("days", MAX_DAYS), ("limit", 500)):
        if params.get(name):
            value = int_param(params[name], low=1, high=high)
            fields[name] = _checked(value, value is not None, f"{name}: a number from 1 to {high}")
    return CauseQuery(**fields)


def _checked(value, ok: bool, problem: str):
    if not ok:
        raise FilterError(problem)
    return value


@dataclass
class BackendCauses:
    causes: list
    operators: list
    days: int = DEFAULT_DAYS


def backend_causes(project: Project, days: int = DEFAULT_DAYS) -> BackendCauses:
    """The backend page's top causes (new ones first) and its missing operators, ranked."""
    rows = causes_listed(CauseQuery(project_ids=(project.pk,), days=days, limit=BACKEND_CAUSES_SHOWN))
    return BackendCauses(rows, missing_operators(project, days)[:BACKEND_CAUSES_SHOWN], days)


def causes_page(query: CauseQuery) -> list:
    return causes_listed(query)


def cause_page(cause_id: int) -> dict | None:
    detail = cause_found(cause_id)
    if detail is None:
        return None
    return {
        "detail": detail,
        "issues": issues_for(detail.cause),
        "filed": filed_for(detail.cause),
        "figure": cause_trend_figure(detail.trend),
    }


def issues_for(cause: FailureCause) -> list[KnownIssue]:
    """Known issues whose cause rule names this cause."""
    return list(KnownIssue.objects.filter(cause=cause.rule).order_by("-state", "id")[:20])


def filed_for(cause: FailureCause) -> list[CauseIssue]:
    """The issues the relay filed for this cause in backends' repositories (opt-in per backend:
    relay/checks/cause_issues.py), open ones first; one not yet numbered is still being sent."""
    rows = CauseIssue.objects.filter(rule=cause.rule).select_related("project")
    return list(rows.order_by("-state", "project__full_name")[:50])


def commit_cause_groups(sha: str) -> list:
    return commit_causes(sha) if sha else []


def backend_choices() -> list[Project]:
    return list(Project.objects.filter(active=True, is_health_probe=False).order_by("full_name"))


def suggested_issue(cause_id: int) -> dict | None:
    """A known issue's fields for one cause: named by it, matched by its rule, an upstream bug
    when the reference fails through it too, for every backend."""
    detail = cause_found(cause_id)
    if detail is None:
        return None
    cause = detail.cause
    kind = KnownIssue.Kind.UPSTREAM if detail.shared else KnownIssue.Kind.PRODUCT
    return {"title": cause.label[:200], "kind": kind, "cause": cause.rule, "all_backends": True}
