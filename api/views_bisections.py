"""Bisections (relay.results.bisections): each one's state, probes and result, as the commit,
backend, test and PR pages show them."""

import re

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from relay.inputs.params import int_param
from relay.models import Bisection
from relay.policy.links import pr_path
from relay.results.bisections import bisection_found, bisections_listed

FILTERS = ("state", "backend", "culprit", "limit")


def bisection_json(found) -> dict:
    b = found.bisection
    return {
        "id": b.pk,
        "backend": b.project.full_name,
        "state": b.state,
        "branch": b.branch,
        "good_sha": b.good_sha,
        "bad_sha": b.bad_sha,
        "commits": len(b.commits),
        "tests": b.tests,
        "probes": [
            {
                "number": p.number,
                "role": p.role,
                "sha": p.sha,
                "outcome": p.outcome,
                "dispatch_state": p.dispatch_state,
                "dispatched_at": p.created_at,
                "decided_at": p.decided_at,
            }
            for p in found.probes
        ],
        "result": {
            "culprit_sha": found.culprit or None,
            "verified": found.verified,
            "verified_by": found.verified_by,
            "upstream_trusted": found.verified and found.upstream_trusted,
            "culprit_pr": found.culprit_pr,
            "culprit_url": found.culprit_url or None,
            "culprit_pr_url": pr_path(found.culprit_pr) if found.culprit_pr else None,
            "search_runs": found.search_runs,
            "dispatches": len(found.probes),
            "note": b.note,
            "summary": found.sentence,
        },
        "created_at": b.created_at,
        "finished_at": b.finished_at,
    }


class BisectionListView(APIView):
    """Bisections newest first: each one's state (searching, verifying, verified,
    not_reproducible, timed_out, over_budget, inconclusive), the range it searched (`good_sha`
    passes, `bad_sha` fails, `commits` between them on first parents), the tests, every probe
    (its commit, role — search, culprit or parent re-run — and outcome) and the result: the
    culprit, whether it is verified (fails with it, passes on its parent), its upstream PR."""

    @extend_schema(
        parameters=[
            OpenApiParameter("state", str, description="only bisections in this state"),
            OpenApiParameter("backend", str, description="owner/repo: only this backend's"),
            OpenApiParameter("culprit", str, description="only those naming this commit (7–40 hex)"),
            OpenApiParameter("limit", OpenApiTypes.INT, description="1–500 (100)"),
        ],
        operation_id="v1_bisections_list",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        params = request.query_params
        unknown = sorted(set(params) - {*FILTERS, "format"})
        if unknown:
            raise ValidationError(
                {"detail": f"unknown filter {', '.join(unknown)[:200]}; this list filters by {', '.join(FILTERS)}"}
            )
        state, culprit = params.get("state", ""), params.get("culprit", "")
        if state and state not in Bisection.State.values:
            raise ValidationError({"state": f"one of {', '.join(Bisection.State.values)}"})
        if culprit and not re.fullmatch(r"[0-9a-fA-F]{7,40}", culprit):
            raise ValidationError({"culprit": "7 to 40 hex characters"})
        limit = int_param(params.get("limit"), default=100, low=1, high=500)
        found = bisections_listed(state=state, backend=params.get("backend", "")[:140], culprit=culprit, limit=limit)
        return Response({"bisections": [bisection_json(b) for b in found]})


class BisectionDetailView(APIView):
    """One bisection, as in the list."""

    @extend_schema(operation_id="v1_bisection_retrieve", responses={200: OpenApiTypes.OBJECT})
    def get(self, request, pk):
        found = bisection_found(int(pk))
        if found is None:
            raise NotFound("no such bisection")
        return Response(bisection_json(found))
