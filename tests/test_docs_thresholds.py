"""docs/maintainers.md's promotion table says the pass-rate threshold the pages and the criteria
use: "≥ 90 %", inclusive (relay.levels.criteria), never "> 90 %"."""

import re
from pathlib import Path

from relay.levels.criteria import PASS_RATE_MIN, pass_rate_criterion
from relay.tallies.tally import Tally

DOCS = Path(__file__).resolve().parents[1] / "docs" / "maintainers.md"


def test_the_maintainers_guide_states_the_pass_rate_threshold_the_pages_show():
    row = next(
        line for line in DOCS.read_text().splitlines() if line.startswith("| pass rate (latest attempt per job)")
    )
    shown = pass_rate_criterion(Tally()).threshold
    assert shown == f"≥ {PASS_RATE_MIN:.0%}".replace("%", " %")
    assert re.split(r"\s*\|\s*", row.strip("| "))[-1] == shown
