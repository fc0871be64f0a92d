"""How the verdict policy (relay.verdicts) is shown: each state's glyph and label on a cell,
and the legend every page carries."""

from relay.verdicts import STATES


class StateShown:
    """For anything with a `state`: its glyph and label, as every page shows them."""

    @property
    def glyph(self) -> str:
        return STATES[self.state].glyph

    @property
    def label(self) -> str:
        return STATES[self.state].label


LEGEND = [(state.value, info.glyph, info.label) for state, info in sorted(STATES.items(), key=lambda kv: -kv[1].rank)]
