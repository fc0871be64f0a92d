# ruff: noqa: F811
"""A triage verdict on the pages that show a job attempt: the grid tooltip, the commit page and the
backend page's drill-down, each marking it advisory, saying whether a suspected upstream PR is
this PR, and leaving the job's own result as it was."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from relay.callbacks.triage_verdict import triage_verdict_read
from relay.results.advice import advice_from
from tests.hud.test_views_grid import world  # noqa: F401  (the grid pages' fixture, used by name)

pytestmark = pytest.mark.django_db

SHA = "a" * 40


def normalised(**changes) -> dict:
    raw = {
        "schema_version": "1",
        "category": "upstream",
        "confidence": "high",
        "summary": "test_add fails on OpenReg too",
        "suspected_upstream": {"pr": 100, "reason": "rewrote the add kernel"},
        "evidence": [
            {"test": "TestFooXPU.test_add_xpu_float32", "log_url": "https://logs.example/1", "excerpt": "<b>x</b>"}
        ],
        "analyzer": {"name": "triage-bot", "version": "2.0", "model": "m1"},
        **changes,
    }
    verdict, dropped = triage_verdict_read(raw)
    assert not dropped
    return verdict


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))


def with_verdict(job, **changes):
    job.triage_verdict = normalised(**changes)
    job.save()
    return job


def test_the_tooltip_shows_the_verdict_as_advice_beside_the_jobs_own_failure(client, world):
    with_verdict(world["job"])
    html = client.get(f"/?tip={SHA}.{world['xpu'].id}").content.decode()
    shown = text(html)
    assert "Triage verdict Upstream · high confidence · advisory" in shown
    assert "Suspected upstream change: #100 (this PR) — rewrote the add kernel" in shown, "the commit landed #100"
    assert 'href="https://logs.example/1"' in html and "&lt;b&gt;x&lt;/b&gt;" in html
    assert "From triage-bot 2.0 · model m1" in shown
    assert 'class="c s-failure"' in html, "the cell is still the job's failure"


def test_the_commit_page_marks_a_suspect_that_is_another_pr_as_not_this_pr(client, world):
    with_verdict(world["job"], suspected_upstream={"pr": 170001})
    shown = text(client.get(f"/commit/{SHA}").content.decode())
    assert "#170001 (not this PR)" in shown and "advisory" in shown


def test_the_backend_drill_down_shows_each_attempts_verdict(client, world):
    job = with_verdict(world["job"], category="infra", confidence="low", suspected_upstream=None)
    job.created_at = timezone.now() - timedelta(hours=1)
    job.save()
    html = client.get(f"/crcr/intel/torch-xpu-ops?cell={SHA}:test-ops").content.decode()
    shown = text(html)
    assert "Attempt #1: triage verdict (advisory)" in shown
    assert "Infrastructure · low confidence · advisory" in shown and "Suspected upstream" not in shown


def test_a_job_without_a_verdict_shows_no_advice(client, world):
    assert "Triage verdict" not in client.get(f"/?tip={SHA}.{world['xpu'].id}").content.decode()


@pytest.mark.parametrize(
    "suspect, pr, head, mark",
    [
        ({"pr": 7}, 7, "f" * 40, "(this PR)"),
        ({"pr": 7}, 8, "f" * 40, "(not this PR)"),
        ({"pr": 7}, None, "f" * 40, ""),  # a trunk commit landed by no known PR: nothing is claimed
        ({"commit": "abcdef1"}, 8, "abcdef1" + "0" * 33, "(this PR)"),
        ({"commit": "abcdef1"}, 8, "f" * 40, ""),  # some other commit may still be one of the PR's
    ],
)
def test_this_pr_is_said_only_when_it_is_known(suspect, pr, head, mark):
    advice = advice_from(normalised(suspected_upstream=suspect), pr, head)
    assert advice.suspect_mark == mark


def test_an_unlinkable_suspect_pr_number_is_shown_without_a_link(client, world):
    with_verdict(world["job"], suspected_upstream={"pr": 12345678901})
    html = client.get(f"/?tip={SHA}.{world['xpu'].id}").content.decode()
    assert "#12345678901 (not this PR)" in text(html) and 'href="/pr/12345678901"' not in html
