"""Reactions to intake and callbacks run on a worker (intake stays O(1)); inline when the broker
cannot take them, so nothing is lost."""

import pytest

from relay.checks import reactions as receivers, tasks

pytestmark = pytest.mark.django_db


def test_a_reaction_is_handed_to_a_worker(settings, monkeypatch):
    settings.CRCR_UPSTREAM_REACT_INLINE = False
    sent, ran = [], []
    monkeypatch.setattr(tasks.upstream_react, "apply_async", lambda kwargs: sent.append(kwargs))
    monkeypatch.setitem(receivers.REACTIONS, "job", lambda **ids: ran.append(ids))
    receivers.on_job_recorded(sender=None, job_run_id=7)
    assert sent == [{"kind": "job", "ids": {"job_run_id": 7}}] and ran == []
    tasks.upstream_react(**sent[0])
    assert ran == [{"job_run_id": 7}]


def test_a_reaction_runs_inline_when_the_broker_is_down(settings, monkeypatch):
    settings.CRCR_UPSTREAM_REACT_INLINE = False
    ran = []

    def broker_down(**kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(tasks.upstream_react, "apply_async", broker_down)
    monkeypatch.setitem(receivers.REACTIONS, "dispatch", lambda **ids: ran.append(ids))
    receivers.on_dispatch_sent(sender=None, dispatch_id=3)
    assert ran == [{"dispatch_id": 3}]
