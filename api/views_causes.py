"""Failure causes (relay.results.causes through hud.selectors_causes): the list with its filters,
and one cause in full, as the /causes pages show them."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from hud.selectors_causes import FilterError, cause_page, cause_query, causes_page


def cause_json(cause) -> dict:
    return {
        "id": cause.pk,
        "kind": cause.kind,
        "exception": cause.exception,
        "signature": cause.signature,
        "operator": cause.operator or None,
        "rule": cause.rule,
        "example": cause.example,
        "version": cause.version,
        "first_seen_at": cause.first_seen_at,
        "last_seen_at": cause.last_seen_at,
    }


def row_json(row) -> dict:
    return {
        **cause_json(row.cause),
        "tests": row.tests,
        "failures": row.failures,
        "commits": row.commits,
        "runs": row.runs,
        "backends": [p.full_name for p in row.backends],
        "shared_with_reference": row.shared,
        "reference_tests": row.reference_tests,
        "new": row.new,
        "first_seen_at": row.first_seen_at,
        "last_seen_at": row.last_seen_at,
    }


class CauseListView(APIView):
    """Causes of the failures in a window, most tests first (for one backend: new ones first).
    Each: its reason (`rule` is what a known issue's `cause` names), the tests, failures,
    commits and runs in the window, the backends, whether the reference fails through it too."""

    @extend_schema(
        parameters=[
            OpenApiParameter("backend", str, description="owner/repo: only this backend's failures"),
            OpenApiParameter("kind", str, description="reason or missing_operator"),
            OpenApiParameter("sha", str, description="only failures on this commit (40 hex)"),
            OpenApiParameter("operator", str, description="only this missing operator (aten::name)"),
            OpenApiParameter("shared", str, description="yes: the reference fails through it too; no: it does not"),
            OpenApiParameter("days", OpenApiTypes.INT, description="window, 1–90 days (7)"),
            OpenApiParameter("limit", OpenApiTypes.INT, description="1–500 (100)"),
        ],
        operation_id="v1_causes_list",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        try:
            query = cause_query(request.query_params)
        except FilterError as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        return Response({"days": query.days, "causes": [row_json(r) for r in causes_page(query)]})


class CauseDetailView(APIView):
    """One cause: its backends, tests, commits, runs and daily trend, the known issues that name
    it, and the issues filed for it in backends' repositories."""

    @extend_schema(operation_id="v1_cause_retrieve", responses={200: OpenApiTypes.OBJECT})
    def get(self, request, pk):
        found = cause_page(int(pk))
        if found is None:
            raise NotFound("no such cause")
        detail = found["detail"]
        return Response(
            {
                **cause_json(detail.cause),
                "current": detail.current,
                "shared_with_reference": detail.shared,
                "runs": detail.runs,
                "backends": [
                    {"backend": b["project__full_name"], "tests": b["tests"], "first": b["first"], "last": b["last"]}
                    for b in detail.backends
                ],
                "tests": [
                    {"test_id": t["identity__identity"], "backends": t["backends"], "failures": t["failures"]}
                    for t in detail.tests
                ],
                "commits": [{"sha": c["sha"], "tests": c["tests"]} for c in detail.commits],
                "trend": detail.trend,
                "known_issues": [{"id": i.pk, "title": i.title, "state": i.state} for i in found["issues"]],
                "filed_issues": [
                    {
                        "backend": f.project.full_name,
                        "number": f.number,
                        "url": f.html_url or None,
                        "state": f.state,
                        "tests": f.tests,
                        "trunk_commits": f.trunk_commits,
                        "opened_at": f.opened_at,
                        "closed_at": f.closed_at,
                    }
                    for f in found["filed"]
                ],
            }
        )
