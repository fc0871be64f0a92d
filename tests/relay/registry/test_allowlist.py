from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from relay.registry.allowlist import AllowlistError, Entry, parse_allowlist, render_allowlist

SAMPLE = (Path(__file__).resolve().parents[2] / "fixtures" / "allowlist.yml").read_text()
EVERY_SHAPE = (Path(__file__).resolve().parents[2] / "fixtures" / "allowlist_every_shape.yml").read_text()


def hud_read(text: str) -> dict[str, tuple[str, str, list[str], list[str]]]:
    """What the HUD's parser (test-infra torchci/lib/crcrAllowlist.ts, with #8856's events) makes
    of a file: a mapping value is metadata, oncalls a comma string or a list, events default to both."""
    doc = yaml.safe_load(text) or {}
    repos = {}

    def read(value):
        meta = value if isinstance(value, dict) else {"oncalls": value}
        oncalls = meta.get("oncalls")
        oncalls = (
            []
            if oncalls is None
            else [o.strip() for o in oncalls.split(",")]
            if isinstance(oncalls, str)
            else [str(o) for o in oncalls]
        )
        # a leading @ is dropped on our side (handles are stored bare); compare without it
        return [o.removeprefix("@") for o in oncalls if o], list(meta.get("events") or ["pull_request", "nightly"])

    for level in ("L1", "L2", "L4"):
        for item in doc.get(level) or []:
            name, value = (item, None) if isinstance(item, str) else next(iter(item.items()))
            repos[name.strip().strip("/")] = (level, "", *read(value))
    for device, mapping in (doc.get("L3") or {}).items():
        for name, value in mapping.items():
            repos[name.strip().strip("/")] = ("L3", str(device).strip(), *read(value))
    return repos


def as_hud_reads(entries) -> dict:
    return {
        e.full_name: (e.level, e.device, list(e.oncalls), list(e.events or ("pull_request", "nightly")))
        for e in entries
    }


def upstream_read(text: str) -> dict[str, tuple[str, str, list[str]]]:
    """What the upstream relay makes of a file, quirks included (reference/relay.md §2.2): on
    L1/L2/L4 the oncall value is turned into text and split on commas; on L3 it is iterated."""
    doc = yaml.safe_load(text) or {}
    repos = {}
    for level in ("L1", "L2", "L4"):
        for item in doc.get(level) or []:
            name, value = (item, None) if isinstance(item, str) else next(iter(item.items()))
            oncalls = [] if value is None else [part.strip() for part in str(value).split(",")]
            repos[name.strip().strip("/")] = (level, "", oncalls)
    for device, mapping in (doc.get("L3") or {}).items():
        for name, value in mapping.items():
            repos[name.strip().strip("/")] = ("L3", str(device).strip(), list(value or []))
    return repos


def errors_of(text: str) -> list[str]:
    with pytest.raises(AllowlistError) as caught:
        parse_allowlist(text)
    return caught.value.errors


# --- accepted shapes -----------------------------------------------------------------------------


def test_it_reads_the_sample_allowlist():
    entries = parse_allowlist(SAMPLE)
    assert [e.full_name for e in entries if e.level == "L1"] == [
        "sgl-project/sglang",
        "deepspeedai/DeepSpeed",
        "pytorch/ao",
    ]
    assert Entry("vllm-project/vllm", "L2", "", ("vllm-ci", "khluu"), 1) in entries
    assert Entry("Ascend/pytorch", "L3", "npu", ("ascend-ci",), 1) in entries
    assert Entry("ROCm/pytorch", "L4", "", ("rocm-ci-oncall",), 0) in entries


@pytest.mark.parametrize("text", ["", "# nothing registered yet\n", "{}", "L1:\nL2:\nL3:\nL4:\n"])
def test_it_reads_an_empty_document_or_empty_levels_as_no_repositories(text):
    assert parse_allowlist(text) == []


def test_it_ignores_unknown_top_level_keys():
    assert parse_allowlist("L5: [a/b]\nowners: whatever\nL2: [c/d]\n") == [Entry("c/d", "L2")]


def test_it_strips_whitespace_and_slashes_around_repository_names():
    assert parse_allowlist("L1:\n  - ' /owner/repo/ '\n")[0].full_name == "owner/repo"


def test_it_reads_list_level_oncalls_written_as_a_comma_string():
    assert parse_allowlist("L2:\n  - o/r: alice, bob\n")[0].oncalls == ("alice", "bob")


def test_it_reads_list_level_oncalls_written_as_a_yaml_list_which_upstream_mangles():
    assert parse_allowlist("L4:\n  - o/r: [alice, bob]\n")[0].oncalls == ("alice", "bob")


def test_it_reads_l3_oncalls_written_as_a_comma_string_which_upstream_splits_into_characters():
    assert parse_allowlist("L3:\n  xpu:\n    o/r: alice, bob\n")[0].oncalls == ("alice", "bob")


@pytest.mark.parametrize("text", ["L2:\n  - o/r:\n", "L3:\n  xpu:\n    o/r:\n", "L3:\n  xpu:\n    o/r: []\n"])
def test_it_reads_a_null_or_empty_oncall_value_as_no_oncalls(text):
    assert parse_allowlist(text)[0].oncalls == ()


def test_it_strips_a_leading_at_from_handles_and_skips_empty_pieces():
    assert parse_allowlist("L2:\n  - o/r: '@alice, ,bob,'\n")[0].oncalls == ("alice", "bob")


def test_it_reads_an_all_digit_handle_written_without_quotes():
    assert parse_allowlist("L2:\n  - o/r: 12345\n")[0].oncalls == ("12345",)


def test_it_records_the_device_for_l3_entries_only():
    entries = parse_allowlist("L2: [a/b]\nL3:\n  ' xpu ':\n    c/d: [x]\n")
    assert [(e.level, e.device) for e in entries] == [("L2", ""), ("L3", "xpu")]


def test_it_numbers_positions_within_each_level_and_across_l3_devices():
    entries = parse_allowlist(SAMPLE)
    assert [(e.level, e.position) for e in entries if e.level in ("L2", "L3")] == [
        ("L2", 0),
        ("L2", 1),
        ("L2", 2),
        ("L2", 3),
        ("L3", 0),
        ("L3", 1),
        ("L3", 2),
    ]


def test_it_accepts_a_device_with_an_empty_mapping():
    assert parse_allowlist("L3:\n  xpu: {}\n") == []


# --- refused shapes ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["- a/b\n", "just text\n", "42\n"])
def test_it_refuses_a_root_that_is_not_a_mapping(text):
    assert "document must be a mapping" in errors_of(text)[0]


@pytest.mark.parametrize("text", ["L1: a/b\n", "L2: {a/b: x}\n", "L4: 3\n"])
def test_it_refuses_a_list_level_that_is_not_a_list(text):
    assert "must be a list of repositories" in errors_of(text)[0]


def test_it_refuses_l3_written_as_a_list():
    assert errors_of("L3:\n  - a/b\n") == ["L3 must be a mapping of device to repositories, not a list"]


@pytest.mark.parametrize("key", ["", "   "])
def test_it_refuses_an_empty_device_name(key):
    assert errors_of(f"L3:\n  '{key}':\n    a/b: []\n") == [f"L3 device 1 ({key!r}): device name must not be empty"]


@pytest.mark.parametrize("value", ["", " []", " a/b"])
def test_it_refuses_a_device_whose_value_is_not_a_mapping(value):
    assert errors_of(f"L3:\n  xpu:{value}\n")[0].startswith(
        "L3 device 'xpu': must be a mapping of owner/repo to oncalls"
    )


def test_it_refuses_a_device_that_differs_only_in_case_from_another():
    errors = errors_of("L3:\n  xpu:\n    a/b: []\n  XPU:\n    c/d: []\n")
    assert errors == ["L3 device 2 ('XPU'): duplicate of device 'xpu' (devices compare case-insensitively)"]


def test_it_refuses_a_mapping_item_with_more_than_one_key():
    assert (
        "entry 1 ({'a/b': 'x', 'c/d': 'y'}): a mapping item must have exactly one key"
        in errors_of("L2:\n  - {a/b: x, c/d: y}\n")[0]
    )


@pytest.mark.parametrize("item", ["3", "~", "[a/b]", "true"])
def test_it_refuses_an_item_that_is_neither_text_nor_a_mapping(item):
    assert "must be owner/repo or a one-key mapping" in errors_of(f"L1:\n  - a/b\n  - {item}\n")[0]


@pytest.mark.parametrize(
    "name",
    [
        "foo",
        "a/b/c",
        "-owner/repo",
        "owner/..",
        "owner/.",
        "own er/repo",
        "owner/re po",
        "o" * 40 + "/r",
        "o/" + "r" * 101,
        "o/r@x",
    ],
)
def test_it_refuses_a_repository_that_is_not_a_github_owner_and_repo(name):
    [error] = errors_of(f"L2:\n  - c/d\n  - {name!r}\n")
    assert error.startswith(f"L2 entry 2 ({name[:20]!r}"[:-1])
    assert error.endswith("): repository must be owner/repo (GitHub owner and repository name rules)")


@pytest.mark.parametrize("handle", ["-alice", "al ice", "al_ice", "a" * 40, "team/name"])
def test_it_refuses_an_oncall_that_is_not_a_github_handle(handle):
    assert errors_of(f"L2:\n  - o/r: [ok, {handle!r}]\n") == [
        f"L2 entry 1 ('o/r'): oncall {handle!r} is not a GitHub handle"
    ]


def test_it_refuses_an_oncall_that_yaml_reads_as_a_boolean_and_says_to_quote_it():
    [error] = errors_of("L3:\n  xpu:\n    o/r: [yes]\n")
    assert error.startswith("L3 device 'xpu' entry 1 ('o/r'): oncall True must be a GitHub handle") and "quote" in error


def test_it_refuses_oncalls_written_as_a_mapping():
    assert (
        "oncalls must be a comma-separated string or a list" in errors_of("L2:\n  - o/r:\n      oncalls: {a: b}\n")[0]
    )


# --- per-entry metadata (test-infra #8855/#8856, pytorch/pytorch #197864) -------------------------


def test_it_reads_the_metadata_shapes_of_the_issue_on_a_list_level_and_on_l3():
    text = "L2:\n  - TorchedHat/pytorch-redhat-ci:\n      events: [nightly]\n      oncalls: [someone]\nL3:\n  xpu:\n    intel/torch-xpu-ops:\n      events: [pull_request]\n      oncalls: someone-else\n"
    assert parse_allowlist(text) == [
        Entry("TorchedHat/pytorch-redhat-ci", "L2", "", ("someone",), 0, ("nightly",)),
        Entry("intel/torch-xpu-ops", "L3", "xpu", ("someone-else",), 0, ("pull_request",)),
    ]


def test_it_reads_every_accepted_shape_mixed_in_one_file_as_the_hud_parser_does():
    entries = parse_allowlist(EVERY_SHAPE)
    assert len(entries) == 18
    assert as_hud_reads(entries) == hud_read(EVERY_SHAPE)


def test_it_leaves_events_empty_when_absent_which_means_both():
    [plain, listed, meta] = parse_allowlist("L2:\n  - a/b\n  - c/d: [x]\n  - e/f:\n      oncalls: x, y\n")
    assert plain.events == listed.events == meta.events == ()
    assert meta.oncalls == ("x", "y")


@pytest.mark.parametrize(
    ("events", "problem"),
    [
        ("[push]", "unsupported event 'push'"),
        ("[]", "events must be a non-empty list"),
        ("nightly", "events must be a non-empty list"),
        ("[nightly, nightly]", "events lists 'nightly' twice"),
        ("[1]", "unsupported event 1"),
    ],
)
def test_it_refuses_events_the_hud_parser_refuses(events, problem):
    [error] = errors_of(f"L2:\n  - o/r:\n      events: {events}\n")
    assert error.startswith("L2 entry 1 ('o/r'): ") and problem in error


def test_it_refuses_an_unknown_metadata_field_and_names_it():
    [error] = errors_of("L3:\n  xpu:\n    o/r:\n      owner: team\n")
    assert error == "L3 device 'xpu' entry 1 ('o/r'): unsupported metadata field(s) 'owner' (only events and oncalls)"


def test_it_writes_an_entry_with_events_in_the_metadata_shape_and_others_in_the_older_shapes():
    text = render_allowlist(
        [
            Entry("a/b", "L2", oncalls=("x", "y"), events=("nightly",)),
            Entry("c/d", "L2", oncalls=("z",), position=1),
            Entry("e/f", "L3", "xpu", (), 0, ("pull_request",)),
            Entry("g/h", "L3", "xpu", ("w",), 1),
        ]
    )
    assert "L2:\n  - a/b:\n      events: [nightly]\n      oncalls: [x, y]\n  - c/d: z\n" in text
    assert "L3:\n  xpu:\n    e/f:\n      events: [pull_request]\n    g/h: [w]\n" in text


def test_it_round_trips_a_file_mixing_every_accepted_shape():
    entries = parse_allowlist(EVERY_SHAPE)
    text = render_allowlist(entries)
    assert parse_allowlist(text) == entries
    assert hud_read(text) == hud_read(EVERY_SHAPE)


def test_it_refuses_a_duplicate_that_differs_only_in_case_and_names_both_occurrences():
    errors = errors_of("L1:\n  - pytorch/ao\nL3:\n  xpu:\n    PyTorch/AO: []\n")
    assert errors == [
        "L3 device 'xpu' entry 1 ('PyTorch/AO'): duplicate of L1 entry 1 ('pytorch/ao') (repositories compare case-insensitively)"
    ]


def test_it_refuses_a_duplicate_within_one_level():
    assert errors_of("L2:\n  - a/b\n  - c/d: x\n  - a/b/\n")[0].startswith(
        "L2 entry 3 ('a/b/'): duplicate of L2 entry 1 ('a/b')"
    )


def test_it_refuses_a_duplicate_yaml_key_that_loaders_would_silently_collapse():
    [error] = errors_of("L3:\n  xpu:\n    a/b: [x]\n    a/b: [y]\n")
    assert (
        error
        == "invalid YAML at line 4, column 5: while constructing a mapping: found duplicate key 'a/b' (first at line 3)"
    )


def test_it_refuses_invalid_yaml_and_names_the_line():
    [error] = errors_of("L1:\n  - a/b\n  - [c/d\nL2: []\n")
    assert error.startswith("invalid YAML at line 4")


def test_it_reports_every_problem_at_once():
    error = pytest.raises(AllowlistError, parse_allowlist, "L1: a/b\nL2:\n  - foo\n  - 7\nL3:\n  xpu:\n").value
    assert len(error.errors) == 4
    assert str(error) == "\n".join(error.errors)


# --- rendering -----------------------------------------------------------------------------------


def test_it_writes_all_four_levels_in_order_even_when_empty():
    assert render_allowlist([]).splitlines()[1:] == ["L1: []", "L2: []", "L3: {}", "L4: []"]


def test_it_writes_list_level_oncalls_as_a_comma_string_and_bare_repositories_without_them():
    text = render_allowlist([Entry("a/b", "L2", oncalls=("x", "y")), Entry("c/d", "L2", position=1)])
    assert "L2:\n  - a/b: x, y\n  - c/d\n" in text


def test_it_writes_l3_grouped_by_device_with_oncalls_as_lists():
    text = render_allowlist(
        [Entry("a/b", "L3", "xpu", ("x", "y")), Entry("c/d", "L3", "npu", (), 1), Entry("e/f", "L3", "xpu", (), 2)]
    )
    assert "L3:\n  xpu:\n    a/b: [x, y]\n    e/f: []\n  npu:\n    c/d: []\n" in text


def test_it_keeps_position_order_within_a_level():
    text = render_allowlist([Entry("late/one", "L1", position=5), Entry("early/one", "L1", position=2)])
    assert text.index("early/one") < text.index("late/one")


@pytest.mark.parametrize("handle", ["yes", "No", "null", "on", "0x1f", "0123", "123", "2001-12-14"])
def test_it_quotes_handles_that_yaml_would_read_as_something_else(handle):
    entries = [Entry("a/b", "L2", oncalls=(handle,)), Entry("c/d", "L3", handle, (handle,))]
    text = render_allowlist(entries)
    assert parse_allowlist(text) == entries
    assert upstream_read(text) == {"a/b": ("L2", "", [handle]), "c/d": ("L3", handle, [handle])}


def test_its_output_of_the_sample_reads_the_same_under_the_upstream_relay_rules():
    entries = parse_allowlist(SAMPLE)
    assert upstream_read(render_allowlist(entries)) == {
        e.full_name: (e.level, e.device, list(e.oncalls)) for e in entries
    }


def test_it_round_trips_the_sample():
    entries = parse_allowlist(SAMPLE)
    assert parse_allowlist(render_allowlist(entries)) == entries


# --- round trip property -------------------------------------------------------------------------

TRICKY = ["yes", "no", "null", "true", "off", "0x1f", "0b1", "0123", "123", "2001-12-14"]
handles = st.one_of(st.sampled_from(TRICKY), st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}", fullmatch=True))
owners = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}", fullmatch=True)
repos = st.from_regex(r"[A-Za-z0-9._-]{1,100}", fullmatch=True).filter(lambda r: r not in {".", ".."})
names = st.builds(lambda o, r: f"{o}/{r}", owners, repos)
devices = st.one_of(
    st.sampled_from(["xpu", "npu", "0123", "on"]), st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,37}", fullmatch=True)
)


@st.composite
def allowlists(draw):
    """Entries as the parser returns them: positions counted per level, L3 grouped by device."""
    full_names = draw(st.lists(names, max_size=12, unique_by=str.lower))
    device_pool = draw(st.lists(devices, min_size=1, max_size=3, unique_by=str.lower))
    by_level: dict[str, list] = {"L1": [], "L2": [], "L3": [], "L4": []}
    for name in full_names:
        level = draw(st.sampled_from(list(by_level)))
        device = draw(st.sampled_from(device_pool)) if level == "L3" else ""
        events = draw(
            st.sampled_from(
                [(), (), ("nightly",), ("pull_request",), ("pull_request", "nightly"), ("nightly", "pull_request")]
            )
        )
        by_level[level].append((device, name, tuple(draw(st.lists(handles, max_size=3))), events))
    by_level["L3"].sort(key=lambda item: device_pool.index(item[0]))
    return [Entry(n, level, d, o, i, e) for level, items in by_level.items() for i, (d, n, o, e) in enumerate(items)]


@settings(max_examples=100, deadline=None)
@given(allowlists())
def test_what_it_writes_reads_the_same_under_the_hud_parser_with_events(entries):
    assert hud_read(render_allowlist(entries)) == as_hud_reads(entries)


@settings(max_examples=150, deadline=None)
@given(allowlists())
def test_it_reads_back_whatever_it_writes(entries):
    text = render_allowlist(entries)
    assert parse_allowlist(text) == entries
    assert parse_allowlist(render_allowlist(parse_allowlist(text))) == parse_allowlist(text)


@settings(max_examples=100, deadline=None)
@given(allowlists())
def test_what_it_writes_reads_the_same_under_the_upstream_relay_rules(entries):
    entries = [replace(e, events=()) for e in entries]  # the snapshot's relay predates `events`
    expected = {e.full_name: (e.level, e.device, list(e.oncalls)) for e in entries}
    assert upstream_read(render_allowlist(entries)) == expected


# --- one entry down a level (the demotion loop) ----------------------------------------------------

DEMOTION_FILE = """# upstream's own header
# kept as it is

L1: []
L2:
  - a/b
L3:
  npu:
    Ascend/pytorch: [x, y]
  rocm:
    ROCm/pytorch: [r]
L4:
  - intel/xpu
"""


def test_demoting_moves_only_that_entry_to_the_end_of_the_level_below_and_keeps_the_header():
    from relay.levels.allowlist_moves import allowlist_demoted

    moved = allowlist_demoted(DEMOTION_FILE, "rocm/PyTorch", "L3")
    assert moved.startswith("# upstream's own header\n# kept as it is\n\nL1: []\nL2:\n  - a/b\n  - ROCm/pytorch: r\n")
    assert "rocm:" not in moved and "Ascend/pytorch: [x, y]" in moved


def test_demoting_an_entry_not_at_that_level_is_none_and_l4_to_l3_needs_a_device():
    from relay.levels.allowlist_moves import allowlist_demoted
    from relay.registry.allowlist import AllowlistError

    assert allowlist_demoted(DEMOTION_FILE, "a/b", "L3") is None
    assert allowlist_demoted(DEMOTION_FILE, "nobody/here", "L3") is None
    with pytest.raises(AllowlistError):
        allowlist_demoted(DEMOTION_FILE, "intel/xpu", "L4")
    assert "    intel/xpu: []" in allowlist_demoted(DEMOTION_FILE, "intel/xpu", "L4", device="xpu")
