"""API endpoints over what the HUD computes: a commit's baseline comparison, a PR's heads and
its merge-gate verdict, and the per-backend summary."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from hud.baseline import commit_baseline
from hud.selectors_grid import pr_page
from relay.models import UpstreamCommit


class BaselineView(APIView):
    """How each backend's failures on a commit compare with the OpenReg reference: shared
    (likely upstream), backend-only, not comparable, reference-only, and new versus the parent."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, sha):
        sha = _full_sha(sha)
        return Response(commit_baseline(sha).to_dict())


def _full_sha(prefix: str) -> str:
    prefix = prefix.lower()
    if len(prefix) == 40:
        return prefix
    matches = list(UpstreamCommit.objects.filter(sha__startswith=prefix).values_list("sha", flat=True)[:2])
    if len(matches) != 1:
        raise NotFound("no commit with that SHA" if not matches else "SHA prefix is ambiguous")
    return matches[0]


class HeadOut(serializers.Serializer):
    sha = serializers.CharField()
    first_seen = serializers.DateTimeField()
    title = serializers.CharField()
    backends = serializers.DictField(child=serializers.CharField(), help_text="backend → status (hud.status policy)")


class PullRequestOut(serializers.Serializer):
    number = serializers.IntegerField()
    title = serializers.CharField()
    summary = serializers.CharField(help_text='e.g. "5/7 backends passed, 1 running, 1 failing (backend-specific)"')
    heads = HeadOut(many=True)
    gate = serializers.DictField(allow_null=True)


class PullRequestView(APIView):
    """One row per head SHA the PR has had, newest first, with each backend's status."""

    @extend_schema(responses={200: PullRequestOut})
    def get(self, request, number):
        page = pr_page(int(number))
        if not page.heads:
            raise NotFound(f"the relay has seen no head of PR #{number}")
        heads = [_head(head, page.columns) for head in page.heads]
        return Response({"number": int(number), "title": page.title, "summary": page.summary, "heads": heads, "gate": page.gate})


def _head(head, columns) -> dict:
    states = {col.project.full_name: cell.state.value for col, cell in zip(columns, head.row.cells) if col.job is None}
    return {"sha": head.sha, "first_seen": head.first_seen, "title": head.commit.title if head.commit else "", "backends": states}


class GateView(APIView):
    """The `crcr/gate` verdict for the PR's newest head (or `?sha=`): pending, failure or
    success over the L4 backends — the same verdict the check run carries."""

    @extend_schema(parameters=[OpenApiParameter("sha", str, description="a head SHA of the PR; default the newest")], responses={200: OpenApiTypes.OBJECT})
    def get(self, request, number):
        from relay.checks.gate import gate_verdict, pr_head

        number = int(number)
        newest_seen = UpstreamCommit.objects.filter(pr_number=number).order_by("-landed_at").values_list("sha", flat=True).first()
        sha = (request.query_params.get("sha") or pr_head(number) or newest_seen or "").lower()
        if not sha:
            raise NotFound(f"the relay has seen no head of PR #{number}")
        return Response({"pr": number, **gate_verdict(number, sha)})
