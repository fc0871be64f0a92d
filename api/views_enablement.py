"""Enablement (relay.enablement, through hud.selectors_enablement): backends × integration paths
on trunk, the reference's row first; one backend's modules with the reference's counts, its
modules skipping more since a commit, its un-skip candidates and its enabled tests per day."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from hud.selectors_backend import backend_find
from hud.selectors_enablement import PATHS, backend_modules, enabled_history_page, enablement_page, path_known

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def _counts(counts) -> dict | None:
    if counts is None:
        return None
    return {**{outcome: getattr(counts, outcome) for outcome in OUTCOMES}, "ran": counts.ran}


def _cell(cell) -> dict:
    return {
        **_counts(cell.counts),
        "reference_passed": cell.reference_passed,
        "parity": None if cell.parity is None else round(cell.parity, 4),
        "trend": cell.trend,
    }


def _row(row) -> dict:
    return {
        "backend": row.project.full_name,
        "reference": row.is_reference,
        "sha": row.commit.sha if row.commit else None,
        "reference_sha": row.reference_commit.sha if row.reference_commit else None,
        "paths": {cell.path: _cell(cell) for cell in row.cells},
    }


class EnablementView(APIView):
    """Every backend reporting results (L2 and up), the OpenReg reference first, on its newest
    trunk commit with counts per module: per integration path the counts summed over its
    modules, `parity` (of the tests the reference passes in the path, the share the backend
    passes, from counts per module; null where the reference passes none) and `trend` (passed
    now less passed on the newest counted trunk commit at least 7 days older; null without
    one). `paths` is empty for a backend without counts."""

    @extend_schema(operation_id="v1_enablement", responses={200: OpenApiTypes.OBJECT})
    def get(self, request):
        table = enablement_page()
        return Response({"paths": list(table.paths), "backends": [_row(row) for row in table.rows]})


def _line(line) -> dict:
    return {
        "module": line.module,
        "path": line.path,
        **_counts(line.counts),
        "reference": _counts(line.reference),
        "skipped_since": {"added": line.rise.added, "sha": line.rise.sha} if line.rise else None,
    }


class BackendEnablementView(APIView):
    """One backend's modules on its newest trunk commit with counts (`path`: one path's), each
    beside the reference's counts and, where its skipped and expected failures rose on a trunk
    commit, `skipped_since` (how many more, since which commit); `unskip_candidates`: the tests
    it passed while marked as expected failures; `history`: per UTC day of the last 90 with
    counts, the tests passed per path on that day's newest counted trunk commit."""

    @extend_schema(
        parameters=[OpenApiParameter("path", str, description=f"one of: {', '.join(PATHS)}")],
        operation_id="v1_enablement_backend",
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, full_name: str):
        path = request.query_params.get("path", "")
        if path and not path_known(path):
            raise ValidationError({"path": f"unknown integration path; one of: {', '.join(PATHS)}"})
        org, _, repo = full_name.partition("/")
        project = backend_find(org, repo)
        if project is None:
            raise NotFound(f"no backend {full_name} is registered")
        view = backend_modules(project, path)
        history = enabled_history_page(project).points
        return Response(
            {
                "backend": project.full_name,
                "sha": view.commit.sha if view.commit else None,
                "reference_sha": view.reference_commit.sha if view.reference_commit else None,
                "modules": [_line(line) for line in view.modules],
                "unskip_candidates": view.candidates,
                "history": [{"day": p.day.isoformat(), "sha": p.sha, "passed": p.passed} for p in history],
            }
        )
