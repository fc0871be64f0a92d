"""How the verdict policy (relay.policy.verdicts) is shown: each state's glyph and label on a cell,
and the legend every page carries; and where a job's per-test results came from."""

from relay.models import JobRun
from relay.policy.verdicts import STATES


class StateShown:
    """For anything with a `state`: its glyph and label, as every page shows them."""

    @property
    def glyph(self) -> str:
        return STATES[self.state].glyph

    @property
    def label(self) -> str:
        return STATES[self.state].label


LEGEND = [(state.value, info.glyph, info.label) for state, info in sorted(STATES.items(), key=lambda kv: -kv[1].rank)]

TESTS_SOURCES = {value: label for value, label in JobRun.TestsSource.choices if value}
"""An imported job's per-test results: from S3, a GitHub artifact or its log (callbacks: none)."""
