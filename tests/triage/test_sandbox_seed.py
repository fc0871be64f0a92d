"""Sandbox mode's triage seed and the stand-in's notification sink."""

import json

import httpx
import pytest

pytestmark = pytest.mark.django_db


def test_the_sandbox_seed_makes_known_issues_expectations_a_mute_and_the_sink_subscription_once():
    from devtools.sandbox_registry import seed_sandbox_registry
    from devtools.sandbox_triage import seed_sandbox_triage
    from relay.models import Expectation, KnownIssue, Subscription, TestMute

    seed_sandbox_registry()
    assert seed_sandbox_triage("http://127.0.0.1:5999") == {"issues": 5, "mutes": 1}
    assert seed_sandbox_triage("http://127.0.0.1:5999") == {"issues": 0, "mutes": 0}
    assert (
        TestMute.objects.get().identity.identity == "test_binary_ufuncs.TestBinaryUfuncs.test_pow_scalar_overflow_int64"
    )
    assert (
        KnownIssue.objects.filter(state="resolved").count() == 1
        and KnownIssue.objects.filter(blocks_gate=False).count() == 1
    )
    assert Expectation.objects.filter(project__full_name="pytorch-mps/mps-ci").count() == 3
    from relay.models import CauseIssuePolicy

    assert KnownIssue.objects.filter(cause="NotImplementedError: aten::_linalg_eigvals").count() == 1
    assert list(CauseIssuePolicy.objects.filter(enabled=True).values_list("project__full_name", flat=True)) == [
        "quic/ai-engine-direct-torch"
    ]
    assert set(Subscription.objects.values_list("target", flat=True)) == {
        "http://127.0.0.1:5999/hooks/crcr",
        "http://127.0.0.1:5999/hooks/slack",
    }


def test_the_sink_logs_what_it_received_and_refuses_every_third_notification_once(tmp_path):
    from devtools.standin.sandbox import NotificationSink

    sink = NotificationSink(tmp_path).start()
    try:
        answers = [
            httpx.post(
                f"{sink.url}/hooks/crcr", json={"title": f"n{n}"}, headers={"X-CRCR-Notification": str(n)}
            ).status_code
            for n in (1, 3, 3)
        ]
    finally:
        sink.stop()
    assert answers == [200, 503, 200]
    logged = [json.loads(line) for line in (tmp_path / "notifications.log").read_text().splitlines()]
    assert [(entry["title"], entry["try"]) for entry in logged] == [("n1", 1), ("n3", 2)]
