"""Moving one entry of upstream's `allowlist.yml` down a level (the demotion loop's pull request)
by editing the file's text in place: the entry's own lines leave its level and are appended to
the level below; every other line — comments at the ends of lines, between entries and at the end
of the file, blank lines, anchors, quoting, the order — stays as upstream's reviewers wrote it.

What may change besides the entry's lines, and only when the move needs it: the key line of a
level the move empties (`L2:` becomes `L2: []`, `L3:` `L3: {}`) or fills (`L1: []` becomes `L1:`),
the line of an L3 device the move empties (removed) or adds, and a missing level key (added).

The entry's lines move as they are, re-indented, unless the level below reads their shape
differently (reference/relay.md §2.2): upstream's relay turns a list level's value into text and
splits it on commas, so a list (`[a, b]`) or an empty value there becomes the comma string or the
bare name; L3 iterates its value, so a comma string or a bare name there becomes a list. A value
holding an anchor other entries name keeps its shape (they read it too). An entry holding an
alias is written afresh when its lines, moved, would come before their anchor.

Whatever the edit, the result is parsed again and must list exactly what the file listed with the
entry moved; a file that cannot be edited so (a level written as a flow collection, `L2: [a/b,
c/d]`) is an AllowlistError saying so, never a rewritten file."""

import bisect
from dataclasses import dataclass, field, replace

import yaml

from relay.registry.allowlist import (
    _DEVICE_RE,
    LEVEL_BELOW,
    LEVELS,
    LIST_LEVELS,
    AllowlistError,
    Entry,
    _flow_list,
    _render_item,
    _render_metadata,
    _scalar,
    _StrictLoader,
    parse_allowlist,
)


class NotInPlace(AllowlistError):
    """The file's layout does not allow moving the entry by lines alone."""


def allowlist_demoted(text: str, full_name: str, from_level: str, device: str = "") -> str | None:
    """`text` with `full_name` moved from `from_level` to the end of the level below, or None when
    the file does not list it at `from_level`. `device` is the L3 device, needed only when the
    level below is L3 (an existing device is matched whatever its case)."""
    entries = parse_allowlist(text)
    found = next((e for e in entries if e.full_name.lower() == full_name.lower()), None)
    if found is None or found.level != from_level or from_level not in LEVEL_BELOW:
        return None
    to_level = LEVEL_BELOW[from_level]
    if to_level == "L3" and not _DEVICE_RE.fullmatch(device):
        raise AllowlistError(f"{full_name}: moving it to L3 needs its device")
    move = _Move(text, found, to_level, device)
    for fresh in (False, True):
        edited = move.edited(fresh)
        if _same_but_moved(entries, _read(edited), found, move.moved):
            return edited
        if not move.has_alias:
            break
    raise NotInPlace(f"{full_name} cannot be moved by editing its lines alone (its anchors are named before it)")


def _read(text: str) -> list[Entry] | None:
    try:
        return parse_allowlist(text)
    except AllowlistError:  # an alias moved above its anchor, say: the caller tries otherwise
        return None


def _same_but_moved(before: list[Entry], after: list[Entry] | None, found: Entry, moved: Entry) -> bool:
    def facts(entry: Entry) -> tuple:
        return entry.full_name.lower(), entry.level, entry.device, entry.oncalls, entry.events

    wanted = {facts(moved if e is found else e) for e in before}
    return after is not None and len(after) == len(before) and {facts(e) for e in after} == wanted


# --- the file as lines and events ---------------------------------------------------------------------


class _Text:
    """The file's lines (with their endings), its YAML events and composed root, and the
    offsets that turn a mark's index into a line."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines(keepends=True)  # a file YAML read has no other line breaks
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))
        self.events = list(yaml.parse(text, Loader=_StrictLoader))
        self.scalar_at = {e.start_mark.index: i for i, e in enumerate(self.events) if isinstance(e, yaml.ScalarEvent)}
        self.collection_at = {
            e.start_mark.index: i for i, e in enumerate(self.events) if isinstance(e, yaml.CollectionStartEvent)
        }
        self.root = yaml.compose(text, Loader=_StrictLoader)
        self.newline = next((line[len(line.rstrip("\r\n")) :] for line in self.lines if line.strip()), "\n") or "\n"

    def line_of(self, index: int) -> int:
        return bisect.bisect_right(self.starts, index) - 1

    def level(self, level: str):
        """(key node, value node) of a level, or None when the file has no such key."""
        return next(((k, v) for k, v in self.root.value if isinstance(k, yaml.ScalarNode) and k.value == level), None)

    def item_end(self, item) -> int:
        """The index just past a list item's own text."""
        at = self.scalar_at if isinstance(item, yaml.ScalarNode) else self.collection_at
        return self._end_of(at[item.start_mark.index])

    def value_end(self, key) -> int:
        """The index just past the text of the value written after a mapping key: read from the
        events, so an alias counts where it is written, not where its anchor is."""
        return max(self._end_of(self.scalar_at[key.start_mark.index] + 1), key.end_mark.index)

    def _end_of(self, first: int) -> int:
        depth, end = 0, self.events[first].start_mark.index
        for event in self.events[first:]:
            if isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
                end = max(end, event.end_mark.index)
            elif isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                end = max(end, event.end_mark.index)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
                if event.end_mark.index > event.start_mark.index:  # a flow collection's closing bracket
                    end = max(end, event.end_mark.index)
            if depth == 0:
                return end
        return end

    def anchored_or_aliased(self, start: int, end: int) -> tuple[bool, bool]:
        """(an anchor is defined in [start, end), an alias is written there)."""
        inside = [e for e in self.events if start <= e.start_mark.index < end]
        return (
            any(getattr(e, "anchor", None) and not isinstance(e, yaml.AliasEvent) for e in inside),
            any(isinstance(e, yaml.AliasEvent) for e in inside),
        )


def _flow(node) -> bool:
    return bool(getattr(node, "flow_style", False))


def _blank_value(node) -> bool:
    return node is None or (isinstance(node, yaml.ScalarNode) and node.tag.endswith(":null"))


def _stripped(name: str) -> str:
    return name.strip().strip("/").lower()


# --- the entry where it is ---------------------------------------------------------------------------


@dataclass
class _Source:
    name: yaml.ScalarNode
    value: object
    """Its value node: None for a bare list item."""
    first: int
    last: int
    """Its lines, first and last (0-based, inclusive)."""
    end: int
    """The index just past its written text (a comment may follow on the last line)."""
    siblings: int
    """How many entries its list or device holds, itself included."""
    device_line: int | None = None
    """An L3 entry's device key line."""
    device_siblings: int = 0


def _source(doc: _Text, entry: Entry) -> _Source:
    key, value = doc.level(entry.level)
    if entry.level == "L3":
        return _l3_source(doc, value, entry)
    if _flow(value):
        raise NotInPlace(f"{entry.level} is written as a flow list; write it as a block list to move {entry.full_name}")
    item = value.value[entry.position]
    name, item_value = (item, None) if isinstance(item, yaml.ScalarNode) else item.value[0]
    _check_prefix(doc, item, "-", entry)
    end = doc.item_end(item)
    return _Source(name, item_value, doc.line_of(item.start_mark.index), doc.line_of(end - 1), end, len(value.value))


def _l3_source(doc: _Text, devices, entry: Entry) -> _Source:
    if _flow(devices):
        raise NotInPlace(f"L3 is written as a flow mapping; write it as a block mapping to move {entry.full_name}")
    for device_key, repos in devices.value:
        if str(device_key.value).strip() != entry.device or _flow(repos):
            continue
        for name, value in repos.value:
            if _stripped(str(name.value)) == entry.full_name.lower():
                _check_prefix(doc, name, "", entry)
                end = doc.value_end(name)
                first, last = doc.line_of(name.start_mark.index), doc.line_of(end - 1)
                device_line = doc.line_of(device_key.start_mark.index)
                return _Source(name, value, first, last, end, len(repos.value), device_line, len(devices.value))
    raise NotInPlace(f"{entry.full_name}: its L3 entry is not written in block style")


def _check_prefix(doc: _Text, node, dash: str, entry: Entry) -> None:
    line = doc.line_of(node.start_mark.index)
    before = doc.text[doc.starts[line] : node.start_mark.index]
    if before.strip() != dash:
        raise NotInPlace(f"{entry.full_name} shares its line with other YAML; it cannot be moved by lines")


# --- where it goes ---------------------------------------------------------------------------------


@dataclass
class _Target:
    after: int
    """The line the entry's lines follow (-1: the file's start)."""
    name_column: int
    dash_column: int | None
    """Where a list item's `-` stands; None in L3."""
    device: str = ""
    """The device the entry lands under (the file's spelling when it has that device)."""
    before: list[str] = field(default_factory=list)
    """Lines the entry needs above it: a level key, a device key."""
    key_edit: tuple[int, str] | None = None
    """A level or device key line rewritten: (line, its new text)."""


def _target(doc: _Text, to_level: str, device: str) -> _Target:
    found = doc.level(to_level)
    if found is None:
        return _missing_level(doc, to_level, device)
    key, value = found
    if to_level == "L3":
        return _l3_target(doc, key, value, device)
    if not _blank_value(value) and not (isinstance(value, yaml.SequenceNode) and not value.value):
        if _flow(value):
            raise NotInPlace(f"{to_level} is written as a flow list; write it as a block list")
        last = value.value[-1]
        return _Target(doc.line_of(doc.item_end(last) - 1), last.start_mark.column, _dash_column(doc, last))
    return _Target(doc.line_of(key.start_mark.index), 4, 2, key_edit=_emptied_key(doc, key, value, fill=True))


def _l3_target(doc: _Text, key, devices, device: str) -> _Target:
    if _blank_value(devices) or (isinstance(devices, yaml.MappingNode) and not devices.value):
        edit = _emptied_key(doc, key, devices, fill=True)
        return _Target(doc.line_of(key.start_mark.index), 4, None, device, [f"  {_scalar(device)}:"], edit)
    if _flow(devices):
        raise NotInPlace("L3 is written as a flow mapping; write it as a block mapping")
    for device_key, repos in devices.value:
        if str(device_key.value).strip().lower() == device.lower() and isinstance(repos, yaml.MappingNode):
            return _device_target(doc, device_key, repos)
    device_column = devices.value[0][0].start_mark.column
    repos_column = next(
        (r.value[0][0].start_mark.column for _, r in devices.value if isinstance(r, yaml.MappingNode) and r.value),
        device_column + 2,
    )
    after = doc.line_of(doc.value_end(devices.value[-1][0]) - 1)
    return _Target(after, repos_column, None, device, [f"{' ' * device_column}{_scalar(device)}:"])


def _device_target(doc: _Text, device_key, repos) -> _Target:
    name = str(device_key.value).strip()
    if not repos.value or _flow(repos):
        if repos.value:
            raise NotInPlace(f"L3 device {name} is written as a flow mapping; write it as a block mapping")
        edit = _emptied_key(doc, device_key, repos, fill=True)
        return _Target(
            doc.line_of(device_key.start_mark.index), device_key.start_mark.column + 2, None, name, key_edit=edit
        )
    after = doc.line_of(doc.value_end(repos.value[-1][0]) - 1)
    return _Target(after, repos.value[0][0].start_mark.column, None, name)


def _missing_level(doc: _Text, to_level: str, device: str) -> _Target:
    """A level the file does not name: its key goes before the next level's key (or at the end)."""
    later = [doc.level(level) for level in LEVELS[LEVELS.index(to_level) + 1 :]]
    keys = [found[0] for found in later if found is not None]
    after = _above_introduction(doc, doc.line_of(keys[0].start_mark.index)) if keys else len(doc.lines) - 1
    if to_level == "L3":
        return _Target(after, 4, None, device, [f"{to_level}:", f"  {_scalar(device)}:"])
    return _Target(after, 4, 2, before=[f"{to_level}:"])


def _above_introduction(doc: _Text, key_line: int) -> int:
    """The line a new level follows when it goes before the level on `key_line`: the last entry
    above, so the blank lines and comments that introduce that level stay with it; in a file
    with nothing above but comments, just above the comments attached to the key."""
    comment = lambda line: line.lstrip().startswith("#")  # noqa: E731
    above = key_line - 1
    while above >= 0 and (not doc.lines[above].strip() or comment(doc.lines[above])):
        above -= 1
    if above >= 0:
        return above
    above = key_line - 1
    while above >= 0 and doc.lines[above].strip() and comment(doc.lines[above]):
        above -= 1
    return above


def _dash_column(doc: _Text, item) -> int:
    line = doc.line_of(item.start_mark.index)
    return doc.text.index("-", doc.starts[line]) - doc.starts[line]


def _emptied_key(doc: _Text, key, value, *, fill: bool) -> tuple[int, str]:
    """The key line with its empty value (`[]`, `{}`, `~`, nothing) taken out when the move fills
    it (`L1: []` → `L1:`), or an empty one written when the move empties it (`L2:` → `L2: []`)."""
    line = doc.line_of(key.start_mark.index)
    text = doc.lines[line]
    start = doc.starts[line]
    colon = doc.text.index(":", key.end_mark.index) - start
    if fill:
        end = value.end_mark.index - start if not _blank_value(value) or value.value else colon + 1
        if doc.line_of(value.end_mark.index) != line and value.end_mark.index > value.start_mark.index:
            raise NotInPlace("an empty level or device is written over several lines")
        return line, text[: colon + 1] + text[max(end, colon + 1) :]
    return line, text[: colon + 1] + (" []" if isinstance(value, yaml.SequenceNode) else " {}") + text[colon + 1 :]


# --- the move --------------------------------------------------------------------------------------


class _Move:
    def __init__(self, text: str, found: Entry, to_level: str, device: str):
        self.doc = _Text(text)
        self.found, self.to_level = found, to_level
        self.source = _source(self.doc, found)
        self.target = _target(self.doc, to_level, device)
        start, end = self.doc.starts[self.source.first], self.doc.starts[self.source.last + 1]
        self.anchored, self.has_alias = self.doc.anchored_or_aliased(start, end)
        position = 1 + max((e.position for e in parse_allowlist(text) if e.level == to_level), default=-1)
        self.moved = replace(
            found, level=to_level, device=self.target.device if to_level == "L3" else "", position=position
        )

    def edited(self, fresh: bool) -> str:
        """The file with the move made: the entry's own lines reshaped as needed, or (`fresh`)
        written afresh from what it means."""
        lines = list(self.doc.lines)
        replacing: dict[int, list[str]] = {i: [] for i in range(self.source.first, self.source.last + 1)}
        for index, text in self._cleanup():
            replacing[index] = [text] if text is not None else []
        target = self.target
        if target.key_edit:
            lines[target.key_edit[0]] = target.key_edit[1]
        new = [line + self.doc.newline for line in target.before] + (self._fresh() if fresh else self._reshaped())
        if target.after < 0:
            return "".join(new) + self._joined(lines, replacing)
        anchor = replacing.get(target.after, [lines[target.after]])
        if anchor and not anchor[-1].endswith(("\n", "\r")):
            anchor = [*anchor[:-1], anchor[-1] + self.doc.newline]
        replacing[target.after] = anchor + new
        return self._joined(lines, replacing)

    @staticmethod
    def _joined(lines: list[str], replacing: dict[int, list[str]]) -> str:
        return "".join(text for i, line in enumerate(lines) for text in replacing.get(i, [line]))

    def _cleanup(self) -> list[tuple[int, str | None]]:
        """What leaving empties: the device line goes, an emptied level reads `[]`/`{}`."""
        doc, source, found = self.doc, self.source, self.found
        if source.siblings > 1:
            return []
        key, value = doc.level(found.level)
        if found.level != "L3":
            return [_emptied_key(doc, key, value, fill=False)]
        edits = [(source.device_line, None)]
        return edits + ([_emptied_key(doc, key, value, fill=False)] if source.device_siblings == 1 else [])

    # --- the entry's new lines -------------------------------------------------------------------

    def _prefix(self) -> str:
        target = self.target
        if target.dash_column is None:
            return " " * target.name_column
        return " " * target.dash_column + "-" + " " * max(1, target.name_column - target.dash_column - 1)

    def _reshaped(self) -> list[str]:
        doc, source = self.doc, self.source
        one_line = self._one_line()
        if one_line is not None:
            return [one_line]
        old_column = source.name.start_mark.column
        new_column = len(self._prefix())
        first = doc.lines[source.first]
        lines = [self._prefix() + first[old_column:]]
        for line in doc.lines[source.first + 1 : source.last + 1]:
            lines.append(_shifted(line, new_column - old_column))
        if not lines[-1].endswith(("\n", "\r")):
            lines[-1] += doc.newline
        return lines

    def _one_line(self) -> str | None:
        """The entry as one line when the level below reads its value's shape differently."""
        value, to_list = self.source.value, self.to_level in LIST_LEVELS
        if isinstance(value, yaml.MappingNode) or self.anchored:
            return None
        oncalls = list(self.found.oncalls)
        if to_list and (_blank_value(value) or isinstance(value, yaml.SequenceNode)):
            shown = f": {_scalar(', '.join(oncalls))}" if oncalls else ""
        elif not to_list and (value is None or (isinstance(value, yaml.ScalarNode) and not _blank_value(value))):
            shown = f": {_flow_list(oncalls)}"
        else:
            return None
        name = self.doc.text[self.source.name.start_mark.index : self.source.name.end_mark.index]
        return self._prefix() + name + shown + self._tail_comment() + self.doc.newline

    def _tail_comment(self) -> str:
        """A comment ending the entry's last line, kept when the entry is written as one line."""
        doc, source = self.doc, self.source
        rest = doc.text[source.end : doc.starts[source.last + 1]].rstrip("\r\n")
        return rest if rest.lstrip().startswith("#") else ""

    def _fresh(self) -> list[str]:
        """The entry written as the exporter writes it (relay.registry.allowlist), at the target's place."""
        moved, prefix = self.moved, self._prefix()
        name = _scalar(moved.full_name)
        if moved.events:
            indent = " " * (len(prefix) + 2)
            return [prefix + f"{name}:" + self.doc.newline] + [
                line + self.doc.newline for line in _render_metadata(moved, indent)
            ]
        if self.to_level in LIST_LEVELS:
            return [prefix + _render_item(moved) + self.doc.newline]
        return [prefix + f"{name}: {_flow_list(moved.oncalls)}" + self.doc.newline]


def _shifted(line: str, by: int) -> str:
    if not line.strip():
        return line
    if by >= 0:
        return " " * by + line
    spaces = len(line) - len(line.lstrip(" "))
    return line[min(-by, spaces) :]
