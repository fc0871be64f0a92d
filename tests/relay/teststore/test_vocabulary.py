"""*Flaky* means one thing: a test's state on a backend (relay.policy.flakiness.HealthState,
defined once). A job's pass on retry, a declared expectation, a known issue's kind, the triage
advice's category and a bisection that did not reproduce are each named otherwise on pages and
in the API's display text; the flaky badge's tooltip reads the healing threshold the machine uses."""

from types import SimpleNamespace

import pytest
from django.template.loader import render_to_string

from relay import models
from relay.models import Expectation, KnownIssue
from relay.policy import flakiness as machine
from relay.policy.verdicts import STATES, State
from relay.results.advice import CATEGORY_LABELS


def test_the_state_names_are_defined_once():
    assert models.HealthState is machine.HealthState
    assert tuple(models.HealthState.values) == (machine.HEALTHY, machine.FLAKY, machine.BROKEN)
    assert models.TestHealth._meta.get_field("state").choices == models.HealthState.choices


def test_no_other_meaning_is_labelled_flaky():
    labels = {
        "a job's pass on retry": STATES[State.FLAKY].label,
        "a known issue's kind": KnownIssue.Kind.FLAKY.label,
        "a declared expectation": Expectation.Kind.FLAKY.label,
        "the triage advice": CATEGORY_LABELS["flake"],
    }
    assert STATES[State.FLAKY].label == "passed on retry"
    assert [what for what, label in labels.items() if "flak" in label.lower()] == []


@pytest.mark.parametrize("state", ["flaky", "broken"])
def test_the_badge_tooltip_reads_the_healing_threshold_the_machine_uses(settings, state):
    settings.CRCR_TEST_HEALED_AFTER = 4
    health = SimpleNamespace(state=state, pass_on_retry=1, fail_on_retry=0, failing_streak=3, passing_streak=2)
    html = render_to_string("hud/_test_state.html", {"health": health})
    assert "4 clean passes in a row heal it" in html and "10 clean passes" not in html
