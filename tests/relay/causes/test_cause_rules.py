"""Known issues as rules over causes: an issue naming a cause matches every failure with that
reason, on any test and backend, beside (or instead of) test globs and message substrings."""

import pytest

from relay.models import KnownIssue
from relay.policy.testids import TestId
from relay.triage import issues as issue_services
from relay.triage.classify import triager_for
from relay.triage.issues import IssueError
from relay.triage.matching import Failure, PatternError

from .conftest import FFT

pytestmark = pytest.mark.django_db
FFT_RULE = "NotImplementedError: aten::_fft_c2c"


def failure(message: str, method: str = "test_fft_1") -> Failure:
    return Failure(1, TestId("test_spectral_ops", f"TestFFT.{method}"), message)


def test_a_cause_rule_matches_that_reason_on_any_test_and_backend_key():
    issue = issue_services.known_issue_create({"title": "fft", "cause": FFT_RULE}, by="t")
    triager = triager_for([issue])
    assert triager.issue_for(failure(FFT.format(key="XPU"))) == issue
    assert triager.issue_for(failure(FFT.format(key="PrivateUse1"), "test_other")) == issue
    assert (
        triager.issue_for(
            failure("NotImplementedError: Could not run 'aten::mm' with arguments from the 'XPU' backend")
        )
        is None
    )


def test_a_cause_and_a_glob_must_both_hold():
    issue = issue_services.known_issue_create(
        {"title": "fft", "cause": FFT_RULE, "test_patterns": ["TestFFT.test_fft_1"]}, by="t"
    )
    triager = triager_for([issue])
    assert triager.issue_for(failure(FFT.format(key="XPU"))) == issue
    assert triager.issue_for(failure(FFT.format(key="XPU"), "test_fft_2")) is None


def test_an_issue_needs_some_matcher_and_a_cause_is_one():
    with pytest.raises(IssueError):
        issue_services.known_issue_create({"title": "nothing"}, by="t")
    with pytest.raises(PatternError):
        issue_services.known_issue_create({"title": "long", "cause": "x" * 600}, by="t")
    assert issue_services.known_issue_create({"title": "ok", "cause": f"  {FFT_RULE} "}, by="t").cause == FFT_RULE


def test_the_api_takes_and_gives_the_cause(db):
    from tests.api.conftest import _client

    client = _client("tri", ["admin"])
    response = client.post("/api/v1/known-issues/", {"title": "fft", "cause": FFT_RULE}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["cause"] == FFT_RULE
    assert KnownIssue.objects.get().cause == FFT_RULE


def test_the_rule_matches_where_the_pages_triage_failures(world):
    """The commit page's known-issue join reads messages when an issue has a cause rule."""
    from relay.results.baseline import commit_baseline

    issue_services.known_issue_create({"title": "fft", "cause": FFT_RULE}, by="t")
    baseline = commit_baseline(world["commits"][0].sha)
    npu = baseline.for_backend(world["npu"].pk)
    assert (len(npu.known), npu.backend_only) == (2, [])
    assert npu.known[0].known_label == f"known issue #{KnownIssue.objects.get().pk}: fft"
