"""Test-level API: one test's history across upstream commits × backends (cursor-paginated),
the reference's first, from the test store (relay.results.tests); the quality figures each
backend is judged by (relay.results.quality)."""

from urllib.parse import quote, urlencode

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from hud.selectors_tests import DEFAULT_WINDOW, WINDOWS, quality_rows, test_page
from relay.inputs.params import int_param
from relay.policy.links import commit_path
from relay.results.tests import PAGE, BadCursor


def _job(job) -> dict | None:
    if job is None:
        return None
    return {"id": job.id, "run_id": job.run_id, "attempt": job.run_attempt, "url": job.workflow_url or None}


def _cell(cell, column) -> dict:
    return {
        "backend": column.project.full_name,
        "outcome": cell.outcome,
        "inferred": cell.inferred,
        "attempt": cell.attempt,
        "attempts": [{"attempt": a.attempt, "outcome": a.outcome, "inferred": a.inferred} for a in cell.attempts],
        "passed_on_retry": cell.on_retry,
        "mark": cell.mark,
        "muted": cell.muted,
        "flaky": cell.flaky,
        "first_failing": cell.first_failing,
        "last_passing": cell.last_passing,
        "probe": {"role": cell.probe.role, "outcome": cell.probe.outcome, "bisection": cell.probe.bisection}
        if cell.probe
        else None,
        "job": _job(cell.job),
        "commit_url": commit_path(cell.job.head_sha, column.project.id) if cell.job else None,
    }


def _column(column) -> dict:
    health, mute = column.health, column.mute
    return {
        "backend": column.project.full_name,
        "reference": column.project.is_reference,
        "state": health.state if health else "healthy",
        "pass_on_retry": health.pass_on_retry if health else 0,
        "fail_on_retry": health.fail_on_retry if health else 0,
        "failing_streak": health.failing_streak if health else 0,
        "first_failing": column.streak.first_failing,
        "last_passing": column.streak.last_passing,
        "since": column.since.to_dict() if column.since else None,
        "mute": {"id": mute.pk, "reason": mute.reason, "owner": mute.owner, "expires_at": mute.expires_at}
        if mute
        else None,
    }


class TestHistoryView(APIView):
    """One test's outcomes on trunk commits (newest first) × backends, the reference first. Each
    cell: failed, error, xpassed, xfailed, skipped, passed (`inferred` where the backend reported
    per-test results and did not list the test), unknown (no per-test results) or none (did not
    run); its attempt, the job, and `mark` (shared / backend_only / not_comparable against the
    reference's failures on that commit; the reference's own failing cell: shared / reference_only).
    A cell where only a bisection's verification re-run tested the commit carries `probe` (role
    culprit or parent, its outcome, the bisection). Per backend: the flakiness state, retry counts,
    the streak's first failing commit and the last pass before it, `since` (its verified culprit,
    else that first failing commit), and the active mute. A failure the test store has not written
    yet is answered from the job rows, as the page shows it. `next` pages to older commits."""

    __test__ = False

    @extend_schema(
        parameters=[
            OpenApiParameter("after", OpenApiTypes.STR, description="the cursor a previous page's `next` carries"),
            OpenApiParameter("limit", OpenApiTypes.INT, description="commits per page, 1–100 (30)"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request, identity):
        limit = int_param(request.query_params.get("limit"), default=PAGE, low=1, high=100)
        try:
            found = test_page(identity, request.query_params.get("after") or None, limit)
        except BadCursor as exc:
            raise ValidationError({"after": str(exc)}) from exc
        history = found.history
        if history is None:
            raise NotFound(f"no stored history for test {identity[:200]!r}")
        columns = history.columns
        rows = [
            {
                "sha": row.sha,
                "title": row.title,
                "landed_at": row.landed_at,
                "cells": [_cell(c, col) for c, col in zip(row.cells, columns, strict=True)],
            }
            for row in history.rows
        ]
        return Response(
            {
                "test_id": history.identity.identity,
                "module": history.identity.module,
                "test_class": history.identity.test_class,
                "method": history.identity.method,
                "dtypes": history.identity.dtypes,
                "params": history.identity.params,
                "backends": [_column(c) for c in columns],
                "commits": rows,
                "next": self._next(request, identity, history.next_cursor),
            }
        )

    def _next(self, request, identity: str, cursor: str | None) -> str | None:
        if not cursor:
            return None
        path = f"/api/v1/tests/{quote(identity, safe='')}/history"
        return request.build_absolute_uri(path + "?" + urlencode({"after": cursor}))


class QualityView(APIView):
    """Each L2+ backend's quality figures over `range` (24h, 7d, 14d, 30d, 90d; 7d by default):
    coverage of the reference's tests, flaky share and time to recover, each with its value,
    target, whether it is met and its trend (the range's first half, then its second)."""

    @extend_schema(
        parameters=[
            OpenApiParameter("range", OpenApiTypes.STR, enum=list(WINDOWS)),
            OpenApiParameter("backend", OpenApiTypes.STR, description="owner/repo: that backend only"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        window = request.query_params.get("range") or DEFAULT_WINDOW
        if window not in WINDOWS:
            raise ValidationError({"range": f"one of {', '.join(WINDOWS)}"})
        backend = (request.query_params.get("backend") or "").strip().lower()
        rows = [r for r in quality_rows(window) if not backend or r.project.full_name.lower() == backend]
        if backend and not rows:
            raise NotFound(f"no L2+ backend {backend[:200]!r}")
        return Response({"range": window, "backends": [_quality(row) for row in rows]})


def _quality(row) -> dict:
    return {
        "repo": row.project.full_name,
        "figures": [
            {
                "figure": f.key,
                "label": f.label,
                "value": f.value,
                "unit": "days" if f.unit == "days" else "share",
                "target": f.target,
                "met": f.met,
                "trend": {"first_half": f.earlier, "second_half": f.later, "direction": f.trend or None},
                "detail": f.detail,
                "count": f.count,
                "of": f.of,
                "open": f.open,
                "series": {
                    "measures": f.series_label,
                    "points": [{"at": start, "value": value} for start, value in f.series],
                },
            }
            for f in row.quality.figures
        ],
    }
