"""The demotion PR's edit of upstream's allowlist (relay/levels/allowlist_moves.py): one entry's lines
move down a level and nothing else of the file changes — comments, anchors, blank lines, both
`oncalls` shapes and every other entry stay as upstream wrote them (issue 45, item 5)."""

import difflib
import re
from dataclasses import replace
from pathlib import Path

import pytest

from relay.levels.allowlist_moves import allowlist_demoted
from relay.registry.allowlist import LEVEL_BELOW, AllowlistError, parse_allowlist

COMMENTED = (Path(__file__).resolve().parents[2] / "fixtures" / "allowlist_commented.yml").read_text()
EVERY_SHAPE = (Path(__file__).resolve().parents[2] / "fixtures" / "allowlist_every_shape.yml").read_text()
KEY_LINE = re.compile(r"^\s*[A-Za-z0-9._-]+:(\s*(\[\]|\{\}))?(\s+#.*)?$")
"""A level's or a device's own key line, which a move may add, empty or fill."""


def movable(text: str) -> list:
    return [e for e in parse_allowlist(text) if e.level in LEVEL_BELOW]


def entry_lines(text: str, name: str) -> list[str]:
    """The entry's lines as a reader sees them: the line naming it and those indented under it."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if re.match(rf"^\s*(- )?{re.escape(name)}(:|\s|$)", line))
    column = len(lines[first]) - len(lines[first].lstrip(" -"))
    block = [lines[first]]
    for line in lines[first + 1 :]:
        if not line.strip() or len(line) - len(line.lstrip()) <= column:
            break
        block.append(line)
    return block


def changed(before: str, after: str) -> tuple[list[str], list[str]]:
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    removed = [line[1:] for line in diff if line.startswith("-") and not line.startswith("---")]
    added = [line[1:] for line in diff if line.startswith("+") and not line.startswith("+++")]
    return removed, added


def demoted(text: str, entry) -> str:
    return allowlist_demoted(text, entry.full_name, entry.level, device="gaudi" if entry.level == "L4" else "")


@pytest.mark.parametrize("text", [COMMENTED, EVERY_SHAPE], ids=["commented", "every shape"])
def test_every_entry_moves_down_a_level_and_the_file_reads_the_same_otherwise(text):
    for entry in movable(text):
        after = {e.full_name: e for e in parse_allowlist(demoted(text, entry))}
        wanted = {e.full_name: e for e in parse_allowlist(text)}
        to = LEVEL_BELOW[entry.level]
        wanted[entry.full_name] = replace(entry, level=to, device="gaudi" if to == "L3" else "")
        facts = lambda e: (e.level, e.device, e.oncalls, e.events)  # noqa: E731
        assert {n: facts(e) for n, e in after.items()} == {n: facts(e) for n, e in wanted.items()}, entry


@pytest.mark.parametrize("name", [e.full_name for e in movable(COMMENTED)])
def test_the_diff_touches_only_the_entrys_lines_and_the_keys_the_move_needs(name):
    entry = next(e for e in movable(COMMENTED) if e.full_name == name)
    own = entry_lines(COMMENTED, name)
    removed, added = changed(COMMENTED, demoted(COMMENTED, entry))
    assert [line for line in removed if line not in own and not KEY_LINE.match(line)] == []
    moved = [line for line in added if not KEY_LINE.match(line) or name in line]
    assert len(moved) <= len(own) and name in moved[0], added
    assert len(removed) - len(own) <= 2 and len(added) - len(moved) <= 2  # a device or level key at most


@pytest.mark.parametrize("name", [e.full_name for e in movable(COMMENTED)])
def test_every_comment_blank_line_and_anchor_is_kept(name):
    entry = next(e for e in movable(COMMENTED) if e.full_name == name)
    after = demoted(COMMENTED, entry)
    comments = lambda text: sorted(re.findall(r"#[^\n]*", text))  # noqa: E731
    assert comments(after) == comments(COMMENTED)
    assert after.count("\n\n") == COMMENTED.count("\n\n") and after.startswith(COMMENTED.split("\nL1:")[0])
    assert re.findall(r"&\w+", after) == re.findall(r"&\w+", COMMENTED)


def test_a_list_entry_moving_to_l3_gets_a_list_and_an_l3_entry_moving_to_a_list_a_comma_string():
    text = "L2:\n  - a/b\nL3:\n  xpu:  # the device\n    x/y: [one, two]  # kept\n    z/w: [three]\nL4:\n  - c/d: p, q  # ours\n"
    assert changed(text, allowlist_demoted(text, "c/d", "L4", device="xpu")) == (
        ["L4:", "  - c/d: p, q  # ours"],
        ["    c/d: [p, q]  # ours", "L4: []"],
    )
    assert changed(text, allowlist_demoted(text, "x/y", "L3")) == (
        ["    x/y: [one, two]  # kept"],
        ["  - x/y: one, two  # kept"],
    )


def test_an_emptied_device_goes_and_an_emptied_level_says_it_is_empty():
    text = "# head\nL1: []  # none yet\nL2:\n  - a/b\nL3:\n  xpu:\n    x/y: [one]\nL4: []\n"
    assert (
        allowlist_demoted(text, "x/y", "L3")
        == "# head\nL1: []  # none yet\nL2:\n  - a/b\n  - x/y: one\nL3: {}\nL4: []\n"
    )
    assert (
        allowlist_demoted(text, "a/b", "L2")
        == "# head\nL1:  # none yet\n  - a/b\nL2: []\nL3:\n  xpu:\n    x/y: [one]\nL4: []\n"
    )


def test_a_device_or_level_the_file_lacks_is_added_where_a_reader_looks_for_it():
    text = "L2:\n  - a/b\n\n# gating backends\nL4:\n  - c/d\n"
    assert (
        allowlist_demoted(text, "c/d", "L4", device="npu")
        == "L2:\n  - a/b\nL3:\n  npu:\n    c/d: []\n\n# gating backends\nL4: []\n"
    )
    text = "# head\n\n# about L2\nL2:\n  - a/b\n"
    assert allowlist_demoted(text, "a/b", "L2") == "# head\n\nL1:\n  - a/b\n# about L2\nL2: []\n"
    text = "L3:\n  xpu:\n    x/y: [one]\nL4:\n  - c/d\n"
    assert (
        allowlist_demoted(text, "c/d", "L4", device="NPU")
        == "L3:\n  xpu:\n    x/y: [one]\n  NPU:\n    c/d: []\nL4: []\n"
    )


def test_an_entry_holding_an_alias_it_would_move_above_is_written_with_its_value():
    text = "L1: []\nL2:\n  - a/b: &team one, two\n  - c/d: *team  # same team\n"
    assert allowlist_demoted(text, "c/d", "L2") == "L1:\n  - c/d: one, two\nL2:\n  - a/b: &team one, two\n"


def test_crlf_line_endings_are_kept_and_a_missing_final_newline_does_not_join_lines():
    text = "L2:\r\n  - a/b\r\nL3:\r\n  xpu:\r\n    e/f: [x]"
    assert allowlist_demoted(text, "e/f", "L3") == "L2:\r\n  - a/b\r\n  - e/f: x\r\nL3: {}\r\n"


@pytest.mark.parametrize("text", ["L2: [a/b, c/d]\nL3:\n  xpu:\n    e/f:\n", "L3: {xpu: {e/f: [x]}}\nL2: []\n"])
def test_a_level_written_in_flow_style_is_refused_rather_than_rewritten(text):
    with pytest.raises(AllowlistError, match="flow"):
        allowlist_demoted(text, "e/f", "L3")
