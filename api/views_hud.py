"""API endpoints over what the HUD computes: a commit's baseline comparison, a PR's heads and
its merge-gate verdict, and since which commit a backend's jobs and tests fail."""

import re

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from hud.selectors_grid import pr_page
from relay.levels.status import level_status
from relay.models import Project, UpstreamCommit
from relay.results.baseline import commit_baseline
from relay.results.culprits import streaks
from relay.results.gate import gate_verdict
from relay.results.heads import pr_head, sha_resolve
from relay.selectors import active_project, trunk_commit


class BaselineView(APIView):
    """How each backend's failures on a commit compare with the OpenReg reference: shared
    (likely upstream), backend-only, not comparable, reference-only, and new versus the parent."""

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    def get(self, request, sha):
        sha = _full_sha(sha)
        return Response(commit_baseline(sha).to_dict())


def _full_sha(prefix: str) -> str:
    match = sha_resolve(prefix)
    if match.sha is None:
        raise NotFound("SHA prefix is ambiguous" if match.ambiguous else "no commit with that SHA")
    return match.sha


class HeadOut(serializers.Serializer):
    sha = serializers.CharField()
    first_seen = serializers.DateTimeField()
    title = serializers.CharField()
    backends = serializers.DictField(
        child=serializers.CharField(), help_text="backend → status (relay.results.status policy)"
    )


class PullRequestOut(serializers.Serializer):
    number = serializers.IntegerField()
    title = serializers.CharField()
    summary = serializers.CharField(help_text='e.g. "5/7 backends passed, 1 running, 1 failing (backend-specific)"')
    heads = HeadOut(many=True)
    gate = serializers.DictField(allow_null=True)
    landed = serializers.DictField(
        allow_null=True,
        help_text="the trunk commit the PR landed as (its title ends “(#n)”), with each backend's status",
    )


class PullRequestView(APIView):
    """One row per head SHA the PR has had, newest first, with each backend's status; and the
    trunk commit it landed as (`landed`), which answers for a PR whose own heads the relay never
    saw (a ghstack stack, a direct land)."""

    @extend_schema(responses={200: PullRequestOut})
    def get(self, request, number):
        page = pr_page(int(number))
        if not page.heads and page.landed is None:
            raise NotFound(f"the relay has seen no head of PR #{number} and no trunk commit names it")
        heads = [_head(head, page.columns) for head in page.heads]
        landed = None
        if page.landed is not None:
            landed = _row(page.landed.sha, page.landed.landed_at, page.landed.title, page.landed_row, page.columns)
            landed["summary"] = page.landed_summary
        return Response(
            {
                "number": int(number),
                "title": page.title,
                "summary": page.summary,
                "heads": heads,
                "gate": page.gate,
                "landed": landed,
            }
        )


def _head(head, columns) -> dict:
    return _row(head.sha, head.first_seen, head.commit.title if head.commit else "", head.row, columns)


def _row(sha: str, first_seen, title: str, row, columns) -> dict:
    states = {col.project.full_name: cell.state.value for col, cell in zip(columns, row.cells) if col.job is None}
    return {"sha": sha, "first_seen": first_seen, "title": title, "backends": states}


class GateView(APIView):
    """The `crcr/gate` verdict for the PR's newest head (or `?sha=`): pending, failure or
    success over the L4 backends — the same verdict the check run carries."""

    @extend_schema(
        parameters=[OpenApiParameter("sha", str, description="a head SHA of the PR; default the newest")],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, number):
        number = int(number)
        sha = (request.query_params.get("sha") or pr_head(number)).lower()
        if not sha:
            raise NotFound(f"the relay has seen no head of PR #{number}")
        return Response({"pr": number, **gate_verdict(number, sha)})


class CulpritsView(APIView):
    """Since which commit? For one backend (`?backend=owner/repo`), every job and test failing
    at a trunk commit (`?sha=`, default the backend's newest trunk commit with a result): the
    first failing and last passing upstream commits, the suspects between them along the
    first-parent chain, and how many failing results the streak has; `since`, the one answer (the
    culprit the backend's own bisection verified, else the first failing commit, with whose probes
    and at which level), and `known` (the open known issue or expectation accounting for it)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("backend", str, required=True, description="owner/repo of a registered backend"),
            OpenApiParameter("sha", str, description="a trunk commit (7–40 hex); default the newest with a result"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        project = _project(request.query_params.get("backend", ""))
        start = _trunk_commit(request.query_params.get("sha", ""))
        found = streaks(project, start=start)
        return Response(
            {
                "backend": project.full_name,
                "sha": start.sha if start else None,
                "window": settings.CRCR_CULPRIT_WINDOW,
                "streaks": [s.to_dict() for s in found],
            }
        )


class LevelStatusView(APIView):
    """Level decisions in the shape of upstream's `level-status`: per backend (L2–L4) its level,
    `change` (demote for an L3/L4 backend missing a demotion criterion over 7 days, promote for an
    L2 backend meeting every promotion criterion over 14 days, else null), `noData` (no decided job
    in the window: listed, never changed), `windowDays` and `criteria` [{criterion, measured,
    target, met}] (times in seconds, rates as fractions, tenure in days; met null = no data). The
    pass-rate criterion and `passRate` carry the raw and upstream-adjusted rates, which one the
    registry lets decide, and the excused failed jobs with their evidence."""

    @extend_schema(
        parameters=[OpenApiParameter("repo", str, description="owner/repo: only this backend")],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        repo = request.query_params.get("repo", "").strip()
        if repo:
            project = _project(repo)
            repos = [r for r in level_status() if r.project.pk == project.pk]
        else:
            repos = level_status()
        return Response({"repos": [r.as_dict() for r in repos]})


REPO_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")


def _project(full_name: str) -> Project:
    if full_name and not REPO_NAME.fullmatch(full_name.strip()):
        raise ValidationError({"backend": "a repository is owner/repo (letters, digits, '-', '_', '.')"})
    project = active_project(full_name)
    if project is None:
        raise NotFound("no active backend with that owner/repo (give ?backend=owner/repo)")
    return project


def _trunk_commit(sha: str) -> UpstreamCommit | None:
    if not sha:
        return None
    if not re.fullmatch(r"[0-9a-fA-F]{7,40}", sha):
        raise ValidationError({"sha": "a commit SHA is 7 to 40 hexadecimal characters"})
    commit = trunk_commit(_full_sha(sha))
    if commit is None:
        raise NotFound("no trunk commit with that SHA")
    return commit
