"""Reactions to intake and callbacks run on a worker (intake stays O(1)); inline when the broker
cannot take them, so nothing is lost. Each writer names its reaction task directly."""

import pytest

from relay.checks import reactions, tasks

pytestmark = pytest.mark.django_db


def test_a_reaction_is_handed_to_a_worker_after_commit(settings, monkeypatch, django_capture_on_commit_callbacks):
    settings.CRCR_UPSTREAM_REACT_INLINE = False
    sent, ran = [], []
    monkeypatch.setattr(tasks.job_react, "apply_async", lambda kwargs: sent.append(kwargs))
    monkeypatch.setattr(reactions, "job_reacted", lambda job_run_id: ran.append(job_run_id))
    with django_capture_on_commit_callbacks(execute=True):
        tasks.react_on_commit(tasks.job_react, job_run_id=7)
        assert sent == []
    assert sent == [{"job_run_id": 7}] and ran == []
    tasks.job_react(**sent[0])
    assert ran == [7]


def test_a_reaction_runs_inline_when_the_broker_is_down(settings, monkeypatch, django_capture_on_commit_callbacks):
    settings.CRCR_UPSTREAM_REACT_INLINE = False
    ran = []

    def broker_down(**kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(tasks.dispatch_react, "apply_async", broker_down)
    monkeypatch.setattr(reactions, "dispatch_reacted", lambda dispatch_id: ran.append(dispatch_id))
    with django_capture_on_commit_callbacks(execute=True):
        tasks.react_on_commit(tasks.dispatch_react, dispatch_id=3)
    assert ran == [3]


def test_a_message_queued_under_the_old_single_reaction_task_still_runs(monkeypatch):
    ran = []
    monkeypatch.setattr(reactions, "delivery_reacted", lambda *args: ran.append(args))
    tasks.upstream_react(
        kind="delivery", ids={"delivery_pk": 5, "event": "pull_request", "action": "opened", "outcome": "relayed"}
    )
    assert ran == [(5, "pull_request", "opened", "relayed")]


def test_the_reaction_tasks_keep_their_registered_names():
    assert {tasks.dispatch_react.name, tasks.job_react.name, tasks.delivery_react.name, tasks.upstream_react.name} == {
        "relay.dispatch_react",
        "relay.job_react",
        "relay.delivery_react",
        "relay.upstream_react",
    }
