"""The test page (`/test/<identity>`) and the state shown beside every failed test: thin over
relay.results.tests, which reads the test store."""

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from relay.models import Level
from relay.ops.cache import soft_get, soft_set
from relay.policy.testids import report_ids
from relay.results.baseline import CellFailures, failure_kind
from relay.results.cells import reference_backend, registered_backends, reported_environment
from relay.results.quality import Quality, quality_of
from relay.results.tests import (
    PAGE,
    TestHistory,
    identity_find,
    identity_unstored,
    states_for,
    test_history,
)
from relay.stats.windows import DEFAULT_WINDOW, WINDOWS


@dataclass
class TestPage:
    __test__ = False

    text: str
    history: TestHistory | None
    """None: no backend has reported this test as anything but a pass (or it is no test id)."""


def test_page(text: str, cursor: str | None = None, limit: int = PAGE) -> TestPage:
    """The test's history, for the page and the API alike; a test the store has not written yet
    (its minute's lag) has one when a recent job row lists it failing, as the commit page does."""
    identity = identity_find(text) or identity_unstored(text)
    if identity is None:
        return TestPage(text, None)
    history = test_history(identity, cursor, limit)
    return TestPage(text, history if identity.pk is not None or history.failing else None)


test_page.__test__ = False


def baseline_states(baseline) -> None:
    """Each test of a commit's comparison (relay.results.baseline.CommitBaseline) gets `state`:
    its TestState on that backend (flaky, broken, muted) beside its kind, three queries for the
    whole page."""
    lists = [(b.project_id, t) for b in baseline.backends for t in _tests_of(b)]
    reference = reference_backend(registered_backends()) if baseline.reference else None
    if reference is not None:
        lists += [(reference.id, t) for t in baseline.reference_failures]
    states = states_for({(pid, t.test_id) for pid, t in lists})
    for pid, test in lists:
        state = states.get((pid, test.test_id))
        test.state = state.beside(test.kind) if state else None


def _tests_of(comparison) -> list:
    return [*comparison.shared, *comparison.backend_only, *comparison.not_comparable, *comparison.known]


def failed_test_dicts_states(project, tests: list, reference: CellFailures | None = None) -> None:
    """Failed tests of one job as the pages read them (rows as dicts, with `identity` where the
    page computed it, or FailedTest instances) get `test_id` and `state`, beside what the
    reference's failures on the same commit (`reference`; None: none loaded) make of each."""
    plain = [t if isinstance(t, dict) else {"name": t.name, "classname": t.classname, "file": t.file} for t in tests]
    missing = [t for t in plain if not t.get("identity")]
    for test, tid in zip(missing, report_ids(missing, project.device_type, reported_environment(missing)), strict=True):
        test["identity"] = tid
    states = states_for({(project.id, t["identity"].full) for t in plain})
    for test, read in zip(tests, plain, strict=True):
        tid = read["identity"]
        state = states.get((project.id, tid.full))
        _put(test, "test_id", tid.full)
        _put(test, "state", state.beside(failure_kind(tid, reference)) if state else None)


def _put(test, name: str, value) -> None:
    if isinstance(test, dict):
        test[name] = value
    else:
        setattr(test, name, value)


__all__ = ["DEFAULT_WINDOW", "WINDOWS", "QualityRow", "TestPage", "quality_rows", "test_page"]


@dataclass
class QualityRow:
    project: object
    quality: Quality


QUALITY_CACHE_SECONDS = 90


def quality_rows(window_key: str, now=None) -> list[QualityRow]:
    """The quality figures of every L2+ backend (the reference is the yardstick, not judged) over
    the window, for /crcr and the API; shared for a minute and a half (four queries a backend).
    v2: figures carry their series and counts (a v1 entry has neither)."""
    now = now or timezone.now()
    window = WINDOWS[window_key]
    backends = [p for p in registered_backends() if p.level != Level.L1 and not p.is_reference]
    key = f"crcr:quality:v2:{window_key}:{now:%Y%m%d%H%M}:{','.join(str(p.pk) for p in backends)}"
    cached = soft_get(key)
    if cached is None:
        reference = reference_backend(registered_backends())
        since = now - timedelta(days=window.days)
        cached = {p.pk: quality_of(p, reference, since, now) for p in backends}
        soft_set(key, cached, QUALITY_CACHE_SECONDS)
    return [QualityRow(p, cached[p.pk]) for p in backends if p.pk in cached]
