"""Reading and writing the upstream `allowlist.yml` (reference/relay.md §2.2). Pure functions, no DB.

What the parser accepts is the upstream relay's format, minus its quirks: on every level the
oncalls may be a comma-separated string or a YAML list; an entry may instead carry a metadata
mapping `{events: [...], oncalls: ...}` (test-infra #8855/#8856, pytorch #197864): `events` a
non-empty list of distinct `pull_request` / `nightly` (absent: both), any other key refused, as the
HUD's parser does. Duplicates are caught whatever their
case (the upstream relay compares exactly, the HUD case-insensitively; the stricter rule wins so a
file we accept is accepted by both). Duplicate YAML keys, which YAML loaders silently collapse, are
refused too. Every problem is collected and reported at once, each naming the entry it is about
("L2 entry 3 ('foo')", entries counted from 1).

`Entry.position` is the 0-based index of the entry within its level; for L3 it runs across the
devices in file order, so grouping L3 by device (as the writer does) keeps the order intact.

What the writer emits, and why, given how the upstream relay reads each shape:
* all four level keys, always, empty ones as `L1: []` / `L3: {}`: upstream takes an empty list or
  mapping as "no repos", and a reader sees the file is complete rather than truncated;
* L1/L2/L4 items as `- owner/repo`, or `- owner/repo: a, b` with a comma string: upstream turns the
  value into text and splits on commas, so a YAML list there would come out mangled;
* L3 as `device:` → `owner/repo: [a, b]` (or `[]`): upstream iterates the value, so a string there
  would be read character by character;
* an entry with `events` in the metadata shape, `events` first, then `oncalls: [a, b]` when it
  has any (the parsers that read `events` read a list there); entries without `events` keep the
  older shapes above, which every reader understands;
* any scalar that YAML would not read back as the same string (`yes`, `null`, `0x1f`, `123`, ...)
  is single-quoted, so every handle and name survives as text.
Given that, `parse_allowlist(render_allowlist(parse_allowlist(x))) == parse_allowlist(x)`.
"""

import re
import reprlib
from collections.abc import Iterable
from dataclasses import dataclass

import yaml

LEVELS = ("L1", "L2", "L3", "L4")
EVENTS = ("pull_request", "nightly")
METADATA_KEYS = ("events", "oncalls")
LIST_LEVELS = ("L1", "L2", "L4")

_OWNER = r"[A-Za-z0-9][A-Za-z0-9-]{0,38}"
_FULL_NAME_RE = re.compile(rf"{_OWNER}/[A-Za-z0-9._-]{{1,100}}")
_HANDLE_RE = re.compile(_OWNER)
# A device becomes the label `ciflow/crcr/<device>`; GitHub labels stop at 50 characters.
_DEVICE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,37}")
_PLAIN_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/, -]*")

MAX_ALIAS_NODES = 1_000
"""What aliases may add to a document, counted in the nodes they repeat: an anchored oncall list
used by a few entries is tens; a 281-byte "billion laughs" is millions (and made a 52 MB error)."""
MAX_ERRORS = 50
MAX_ERROR_CHARS = 300
"""Every problem is reported (up to MAX_ERRORS, then how many more), each at most this long."""

HEADER = "# allowlist.yml exported by CRCR HUD (upstream relay format; see reference/relay.md §2.2)"


@dataclass(frozen=True)
class Entry:
    full_name: str
    level: str
    device: str = ""
    oncalls: tuple[str, ...] = ()
    position: int = 0
    events: tuple[str, ...] = ()
    """As written; empty when the entry has no `events` (which means both)."""


class AllowlistError(ValueError):
    """One or more problems with an allowlist; `.errors` lists them (at most MAX_ERRORS, each cut
    to MAX_ERROR_CHARS, then a line saying how many more there are)."""

    def __init__(self, errors: str | Iterable[str]):
        errors = [errors] if isinstance(errors, str) else list(errors)
        self.errors = [_cut(e) for e in errors[:MAX_ERRORS]]
        if len(errors) > MAX_ERRORS:
            self.errors.append(f"… and {len(errors) - MAX_ERRORS} more problems")
        super().__init__("\n".join(self.errors))


def _cut(text: str) -> str:
    text = str(text)
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def repo_name_problem(name: str) -> str | None:
    """Why `name` is not a valid GitHub `owner/repo`, or None when it is."""
    if not _FULL_NAME_RE.fullmatch(name) or name.split("/", 1)[1] in {".", ".."}:
        return "repository must be owner/repo (GitHub owner and repository name rules)"
    return None


def handle_problem(handle: str) -> str | None:
    if not _HANDLE_RE.fullmatch(handle):
        return f"oncall {_show(handle)} is not a GitHub handle"
    return None


def clean_handle(handle: str) -> str:
    return handle.strip().removeprefix("@")


def oncall_list(raw) -> list[str]:
    """`oncalls` as handles, whichever shape holds them: a list, or one comma-separated string
    (the allowlist takes both; a row or request written either way reads the same)."""
    return [h for h in (clean_handle(str(item)) for item in _oncall_items(raw) or []) if h]


def oncall_problems(raw) -> list[str]:
    """Why `raw` is not a list or comma-separated string of GitHub handles (empty when it is)."""
    return [p for p in _Parser().oncalls(raw) if p]


# --- parsing -------------------------------------------------------------------------------------


def parse_allowlist(text: str) -> list[Entry]:
    doc = _load(text)
    if doc is None:
        return []
    if not isinstance(doc, dict):
        raise AllowlistError(f"the document must be a mapping of levels (L1, L2, L3, L4), not {_kind(doc)}")
    parser = _Parser()
    for level in LEVELS:
        parser.level(level, doc.get(level))
    if parser.errors:
        raise AllowlistError(parser.errors)
    return parser.entries


class _Parser:
    def __init__(self):
        self.entries: list[Entry] = []
        self.errors: list[str] = []
        self.seen: dict[str, str] = {}  # lower-cased name -> where it was first listed

    def level(self, level, value):
        if value is None:
            return
        if level == "L3":
            self.devices(value)
        elif not isinstance(value, list):
            self.errors.append(f"{level} must be a list of repositories, not {_kind(value)}")
        else:
            for index, item in enumerate(value):
                self.item(level, index, item)

    def item(self, level, index, item):
        where = f"{level} entry {index + 1}"
        if isinstance(item, str):
            self.add(where, level, "", item, None, index)
        elif isinstance(item, dict) and len(item) == 1:
            ((name, oncalls),) = item.items()
            self.add(where, level, "", name, oncalls, index)
        elif isinstance(item, dict):
            self.errors.append(f"{where} ({_show(item)}): a mapping item must have exactly one key, owner/repo")
        else:
            self.errors.append(f"{where} ({_show(item)}): must be owner/repo or a one-key mapping owner/repo: oncalls")

    def devices(self, value):
        if not isinstance(value, dict):
            self.errors.append(f"L3 must be a mapping of device to repositories, not {_kind(value)}")
            return
        seen_devices: dict[str, str] = {}
        position = 0
        for index, (raw_device, repos) in enumerate(value.items(), 1):
            device = self.device(index, raw_device, seen_devices)
            if device is not None and self.repos_mapping(device, repos):
                for number, (name, oncalls) in enumerate(repos.items(), 1):
                    self.add(f"L3 device {device!r} entry {number}", "L3", device, name, oncalls, position)
                    position += 1

    def device(self, index, raw, seen):
        where = f"L3 device {index} ({_show(raw)})"
        if not _is_text(raw):
            return self._fail(f"{where}: device name must be text, not {_kind(raw)}")
        device = str(raw).strip()
        if not device:
            return self._fail(f"{where}: device name must not be empty")
        if not _DEVICE_RE.fullmatch(device):
            return self._fail(f"{where}: device must be letters, digits, '.', '_' or '-', at most 38 characters")
        if device.lower() in seen:
            return self._fail(
                f"{where}: duplicate of device {seen[device.lower()]!r} (devices compare case-insensitively)"
            )
        seen[device.lower()] = device
        return device

    def repos_mapping(self, device, repos) -> bool:
        if isinstance(repos, dict):
            return True
        self.errors.append(f"L3 device {device!r}: must be a mapping of owner/repo to oncalls, not {_kind(repos)}")
        return False

    def add(self, where, level, device, raw_name, raw_value, position):
        where = f"{where} ({_show(raw_name)})"
        name = raw_name.strip().strip("/") if isinstance(raw_name, str) else ""
        raw_oncalls, raw_events, metadata_problems = _metadata(raw_value)
        problems = (
            [repo_name_problem(name)] + metadata_problems + self.oncalls(raw_oncalls) + _events_problems(raw_events)
        )
        problems = [p for p in problems if p] + self.duplicate(where, name)
        if problems:
            self.errors.extend(f"{where}: {problem}" for problem in problems)
            return
        oncalls = tuple(oncall_list(raw_oncalls))
        events = tuple(e.strip() for e in raw_events or ())
        self.entries.append(Entry(name, level, device, oncalls, position, events))

    def oncalls(self, raw) -> list[str | None]:
        if raw is not None and _oncall_items(raw) is None:
            return [
                f"oncalls must be a comma-separated string or a list of GitHub handles, not {_kind(raw)}{_quote_hint(raw)}"
            ]
        problems = []
        for item in _oncall_items(raw) or []:
            if not _is_text(item):
                problems.append(f"oncall {_show(item)} must be a GitHub handle, not {_kind(item)}{_quote_hint(item)}")
            elif handle := clean_handle(str(item)):
                problems.append(handle_problem(handle))
        return problems

    def duplicate(self, where, name) -> list[str]:
        if repo_name_problem(name):
            return []
        if name.lower() not in self.seen:
            self.seen[name.lower()] = where
            return []
        return [f"duplicate of {self.seen[name.lower()]} (repositories compare case-insensitively)"]

    def _fail(self, message):
        self.errors.append(message)
        return None


def _metadata(raw) -> tuple[object, object, list[str]]:
    """(oncalls, events, problems) of an entry's value: the metadata mapping, or oncalls alone."""
    if not isinstance(raw, dict):
        return raw, None, []
    unknown = [str(key) for key in raw if key not in METADATA_KEYS]
    problems = (
        [f"unsupported metadata field(s) {', '.join(map(repr, unknown))} (only events and oncalls)"] if unknown else []
    )
    return raw.get("oncalls"), raw.get("events"), problems


def _events_problems(raw) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not raw:
        return [f"events must be a non-empty list of {' and/or '.join(EVENTS)}, not {_kind(raw)}"]
    problems, seen = [], set()
    for item in raw:
        event = item.strip() if isinstance(item, str) else item
        if event not in EVENTS:
            problems.append(f"unsupported event {_show(item)} (events are {', '.join(EVENTS)})")
        elif event in seen:
            problems.append(f"events lists {_show(event)} twice")
        seen.add(event if isinstance(event, str) else repr(event))
    return problems


def _oncall_items(raw) -> list | None:
    """The oncall handles as written, before cleaning; None when the shape is not accepted."""
    if raw is None:
        return []
    if isinstance(raw, str):
        return raw.split(",")
    if isinstance(raw, list):
        return raw
    # An all-digit handle written bare (`- o/r: 12345`) arrives as an int.
    return [raw] if _is_text(raw) else None


def _is_text(value) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _quote_hint(value) -> str:
    if value is None or isinstance(value, (bool, float)):
        return " (quote handles that YAML reads as true/false/null or numbers)"
    return ""


def _kind(value) -> str:
    if value is None:
        return "null"
    return {dict: "a mapping", list: "a list", str: "a string"}.get(type(value), type(value).__name__)


_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = 80
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict = 2, 4, 4


def _show(value) -> str:
    """A value in an error, at most about 80 characters, in time bounded by that (never the whole
    repr of a large value first)."""
    text = _SHOWN.repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate mapping keys instead of keeping the last one silently,
    and aliases that repeat more than MAX_ALIAS_NODES nodes in all (or themselves)."""

    def __init__(self, stream):
        super().__init__(stream)
        self.alias_nodes = 0
        self.sizes: dict[int, int] = {}
        self.open_anchors: set[str] = set()
        """Anchors whose node is still being read: an alias to one would contain itself."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.events.AliasEvent):
            self._alias_count(event)
            return super().compose_node(parent, index)
        anchor = getattr(event, "anchor", None)
        if anchor is None:
            return super().compose_node(parent, index)
        self.open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self.open_anchors.discard(anchor)

    def _alias_count(self, event) -> None:
        if event.anchor in self.open_anchors:
            raise yaml.composer.ComposerError(
                None, None, f"alias *{_cut(event.anchor)[:40]} is inside its own anchor", event.start_mark
            )
        anchored = self.anchors.get(event.anchor)
        self.alias_nodes += _expanded_size(anchored, self.sizes) if anchored is not None else 0
        if self.alias_nodes > MAX_ALIAS_NODES:
            raise yaml.composer.ComposerError(
                None, None, f"aliases repeat more than {MAX_ALIAS_NODES:,} nodes", event.start_mark
            )

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            _refuse_duplicate_keys(node)
        return super().construct_mapping(node, deep=deep)


def _expanded_size(node, sizes: dict) -> int:
    """How many nodes `node` stands for with its aliases expanded, up to just past the budget
    (memoised by node: an anchored node is complete when an alias names it)."""
    key = id(node)
    if key not in sizes:
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        else:
            children = []
        sizes[key] = min(MAX_ALIAS_NODES + 1, 1 + sum(_expanded_size(child, sizes) for child in children))
    return sizes[key]


def _refuse_duplicate_keys(node):
    seen = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
            continue
        first = seen.setdefault((key_node.tag, key_node.value), key_node.start_mark)
        if first is not key_node.start_mark:
            problem = f"found duplicate key {_show(key_node.value)} (first at line {first.line + 1})"
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, problem, key_node.start_mark
            )


def _load(text: str):
    return yaml_load_strict(text, AllowlistError)


def yaml_load_strict(text: str, error: type[Exception]):
    """Safe-load `text`, refusing duplicate keys; every YAML problem becomes `error(message)`."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise error(_yaml_message(exc)) from exc
    except RecursionError as exc:
        raise error("the YAML is nested too deeply") from exc


def _yaml_message(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    return f"invalid YAML{where}: {context + ': ' if context else ''}{problem}"


# --- rendering -----------------------------------------------------------------------------------


def render_allowlist(entries: Iterable[Entry]) -> str:
    by_level: dict[str, list[Entry]] = {level: [] for level in LEVELS}
    for entry in entries:
        by_level[entry.level].append(entry)
    lines = [HEADER]
    for level in LEVELS:
        ordered = sorted(by_level[level], key=lambda e: e.position)
        lines += _render_l3(ordered) if level == "L3" else _render_list_level(level, ordered)
    return "\n".join(lines) + "\n"


def _render_list_level(level: str, entries: list[Entry]) -> list[str]:
    if not entries:
        return [f"{level}: []"]
    lines = [f"{level}:"]
    for entry in entries:
        lines += (
            [f"  - {_scalar(entry.full_name)}:", *_render_metadata(entry, "      ")]
            if entry.events
            else [f"  - {_render_item(entry)}"]
        )
    return lines


def _render_item(entry: Entry) -> str:
    if not entry.oncalls:
        return _scalar(entry.full_name)
    return f"{_scalar(entry.full_name)}: {_scalar(', '.join(entry.oncalls))}"


def _render_metadata(entry: Entry, indent: str) -> list[str]:
    lines = [f"{indent}events: [{', '.join(entry.events)}]"]
    if entry.oncalls:
        lines.append(f"{indent}oncalls: {_flow_list(entry.oncalls)}")
    return lines


def _flow_list(items) -> str:
    return f"[{', '.join(_scalar(item) for item in items)}]"


def _render_l3(entries: list[Entry]) -> list[str]:
    if not entries:
        return ["L3: {}"]
    devices: dict[str, list[Entry]] = {}
    for entry in entries:
        devices.setdefault(entry.device, []).append(entry)
    lines = ["L3:"]
    for device, repos in devices.items():
        lines.append(f"  {_scalar(device)}:")
        for e in repos:
            lines += (
                [f"    {_scalar(e.full_name)}:", *_render_metadata(e, "      ")]
                if e.events
                else [f"    {_scalar(e.full_name)}: {_flow_list(e.oncalls)}"]
            )
    return lines


# --- one entry down a level (the demotion loop: relay/levels/allowlist_moves.py) ------------------------------

LEVEL_BELOW = {"L4": "L3", "L3": "L2", "L2": "L1"}


def yaml_scalar(text: str) -> str:
    return _scalar(text)


def _scalar(text: str) -> str:
    """`text` as a YAML scalar that reads back as the same string."""
    if _PLAIN_RE.fullmatch(text) and not text.endswith((" ", ",")) and _reads_back(text):
        return text
    return "'" + text.replace("'", "''") + "'"


def _reads_back(text: str) -> bool:
    try:
        return yaml.safe_load(text) == text
    except yaml.YAMLError:
        return False
