"""YAML text to plain values, as strictly as the API server decodes and within bounded cost.

PyYAML's own composer recurses once per nesting level (libyaml's crashes the process on a
few hundred thousand ``[``), expands aliases without counting what they cost (a 600-byte
"billion laughs" file takes minutes and gigabytes) and lets a repeated key silently replace
the first. This reader takes libyaml's events one at a time, in a loop, and builds the
values itself:

* a key repeated in one mapping is an error at its line (``duplicate field "spec.x"``),
  as the API server's strict decoding refuses it;
* nesting deeper than :data:`~gateweave.api.limits.MAX_DEPTH`, more than
  :data:`~gateweave.api.limits.MAX_DOCUMENTS` documents, aliases adding more than
  :data:`~gateweave.api.limits.MAX_ALIAS_NODES` nodes, or an alias inside the node it
  names refuse the text at the line reached, before anything is expanded;
* scalars resolve as PyYAML's SafeLoader resolves them (YAML 1.1), except timestamps,
  which stay strings as Kubernetes keeps them; merge keys (``<<: *base``) merge as in
  SafeLoader; mapping keys are strings (a key that is not a string is kept as written);
  tags other than the core ones (str, int, float, bool, null, map, seq) are refused.

:func:`line_of` goes back from a field path found wrong later (by validation) to the line
of that field in a document's text; it is only run for errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from gateweave.api.limits import MAX_ALIAS_NODES, MAX_DEPTH, MAX_DOCUMENTS, quote

_CORE = "tag:yaml.org,2002:"
_STR, _NULL, _BOOL, _INT, _FLOAT = (_CORE + t for t in ("str", "null", "bool", "int", "float"))
_MERGE_TAG, _VALUE_TAG = _CORE + "merge", _CORE + "value"
_COLLECTION_TAGS = {True: (None, "!", _CORE + "map"), False: (None, "!", _CORE + "seq")}


def _loader_class() -> type[yaml.SafeLoader]:
    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):
        """libyaml's parser (when built) with SafeLoader's resolver, without timestamps."""

    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != _CORE + "timestamp"]
        for first, resolvers in base.yaml_implicit_resolvers.items()
    }
    return Loader


Loader = _loader_class()


class YamlError(Exception):
    """Text that is not YAML (``syntax``) or that this reader refuses; ``line`` is 1-based, 0 when
    unknown.
    """

    def __init__(self, line: int, message: str, *, syntax: bool = False) -> None:
        super().__init__(message)
        self.line = line
        self.message = message
        self.syntax = syntax


@dataclass(frozen=True)
class Document:
    """One document: its value, the 1-based line of its root node, and where its text is
    (``text[start:end]``, ``start`` at the beginning of line ``first_line``, 0-based)."""

    value: Any
    line: int
    start: int
    end: int
    first_line: int
    item_lines: tuple[
        int, ...
    ] = ()  # 1-based lines of the elements of the root mapping's ``items``


def _syntax_error(exc: yaml.YAMLError, text: str) -> YamlError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        parts = [p for p in (exc.context, exc.problem) if p]
        return YamlError(
            mark.line + 1 if mark else 0, "invalid YAML: " + ", ".join(parts), syntax=True
        )
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow
        line = text.count("\n", 0, max(0, exc.position)) + 1
        return YamlError(
            line,
            f"invalid YAML: unacceptable character #x{exc.character:04x}: {exc.reason}",
            syntax=True,
        )
    return YamlError(1, f"invalid YAML: {exc}", syntax=True)


def read_documents(text: str) -> list[Document]:
    """Every document of ``text``; raises :class:`YamlError` (the whole text is refused)."""
    reader = _Reader(text)
    try:
        return reader.documents()
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, text) from None
    finally:
        reader.loader.dispose()


# ---------------------------------------------------------------- building values

_NO_KEY: Any = object()  # a mapping waiting for its next key
_MERGE: Any = object()  # the key ``<<``
_UNSET: Any = object()


class _Frame:
    """A mapping or sequence being built."""

    __slots__ = ("container", "height", "is_map", "item_lines", "key", "merges", "size")

    def __init__(self, is_map: bool) -> None:
        self.is_map = is_map
        self.container: Any = {} if is_map else []
        self.key: Any = _NO_KEY
        self.size = 1  # nodes, aliases expanded
        self.height = 0  # nesting below this node, aliases expanded
        self.merges: list[tuple[Any, int]] = []
        self.item_lines: list[int] | None = None


def _path(stack: Sequence[_Frame], last: str) -> str:
    """The field path of the node being added to ``stack[-1]`` under key ``last``."""
    out = ""
    for frame in stack[:-1]:
        if frame.is_map:
            out = f"{out}.{frame.key}" if out else str(frame.key)
        else:
            out = f"{out}[{len(frame.container)}]"
    return f"{out}.{last}" if out else last


# Plain scalar text -> its value, for every reader: resolving a scalar's implicit tag (a regular
# expression per candidate type) is most of its cost, and the files of a directory repeat their
# keys and many values. The values are immutable (str, int, float, bool, None, the merge key),
# so one object can stand for every occurrence. Bounded: texts up to _PLAIN_TEXT_MAX characters,
# and emptied when it holds _PLAIN_MAX of them.
_PLAIN: dict[str, Any] = {}
_PLAIN_MAX = 16384
_PLAIN_TEXT_MAX = 256
_UNTAGGED = (None, "!")  # a scalar's tag when it is resolved from its text
_SCALAR, _ALIAS = yaml.ScalarEvent, yaml.AliasEvent
_MAPPING_START, _MAPPING_END = yaml.MappingStartEvent, yaml.MappingEndEvent
_SEQUENCE_START, _SEQUENCE_END = yaml.SequenceStartEvent, yaml.SequenceEndEvent


def _line(ev: Any) -> int:
    """The 1-based line an event starts at."""
    return int(ev.start_mark.line) + 1


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.loader = Loader(text)
        self.alias_nodes = 0

    def documents(self) -> list[Document]:
        ld = self.loader
        ld.get_event()  # StreamStartEvent
        docs: list[Document] = []
        while not ld.check_event(yaml.StreamEndEvent):
            start = ld.get_event()  # DocumentStartEvent
            if len(docs) >= MAX_DOCUMENTS:
                raise YamlError(
                    start.start_mark.line + 1, f"more than {MAX_DOCUMENTS} documents in one file"
                )
            value, line, items = self.document()
            end = ld.get_event()  # DocumentEndEvent
            begin = self.text.rfind("\n", 0, start.start_mark.index) + 1
            docs.append(
                Document(value, line, begin, end.end_mark.index, start.start_mark.line, items)
            )
        return docs

    def document(self) -> tuple[Any, int, tuple[int, ...]]:
        """The next document's root value, its line and the lines of its ``items``."""
        get = self.loader.get_event
        plain = _PLAIN
        stack: list[_Frame] = []
        anchors: dict[str, tuple[Any, int, int]] = {}  # name -> (value, size, height)
        open_anchors: list[str] = []
        root_line = 0
        items: tuple[int, ...] = ()
        # (a line is worked out only where it is used: the root's, the items', an error's)
        while True:
            ev = get()
            cls = type(ev)
            if cls is not _MAPPING_END and cls is not _SEQUENCE_END:
                if not stack:
                    root_line = ev.start_mark.line + 1
                elif stack[-1].item_lines is not None:
                    stack[-1].item_lines.append(ev.start_mark.line + 1)
            if cls is _SCALAR:
                # A plain scalar read before (most are): its value from the memo.
                value = (
                    plain.get(ev.value, _UNSET)
                    if ev.implicit[0] and ev.tag in _UNTAGGED
                    else _UNSET
                )
                if value is _UNSET or value is _MERGE:
                    value = self.scalar(
                        ev, bool(stack) and stack[-1].is_map and stack[-1].key is _NO_KEY
                    )
                size, height, anchor = 1, 0, ev.anchor
            elif cls is _MAPPING_START or cls is _SEQUENCE_START:
                is_map = cls is _MAPPING_START
                if len(stack) >= MAX_DEPTH:
                    raise YamlError(_line(ev), f"nested deeper than {MAX_DEPTH} levels")
                if ev.tag not in _COLLECTION_TAGS[is_map]:
                    raise YamlError(_line(ev), f"the tag {quote(ev.tag)} is not supported")
                frame = _Frame(is_map)
                if not is_map and len(stack) == 1 and stack[0].is_map and stack[0].key == "items":
                    frame.item_lines = []
                stack.append(frame)
                open_anchors.append(ev.anchor)
                continue
            elif cls is _MAPPING_END or cls is _SEQUENCE_END:
                frame = stack.pop()
                if frame.merges:
                    self.merge(frame, stack)
                if frame.item_lines is not None:
                    items = tuple(frame.item_lines)
                value, size, height, anchor = (
                    frame.container,
                    frame.size,
                    frame.height + 1,
                    open_anchors.pop(),
                )
            elif cls is _ALIAS:
                value, size, height = self.alias(ev, stack, anchors, open_anchors)
                anchor = None
            else:  # pragma: no cover - libyaml emits nothing else inside a document
                raise YamlError(_line(ev), f"unexpected {cls.__name__}")
            if anchor is not None:
                anchors[anchor] = (value, size, height)
            if not stack:
                return value, root_line, items
            # The value into its parent: a sequence's next element, a mapping's next key, or
            # the value of the key before it.
            parent = stack[-1]
            parent.size += size
            if height > parent.height:
                parent.height = height
            if not parent.is_map:
                parent.container.append(value)
            elif parent.key is _NO_KEY:
                parent.key = self.key(stack, value, ev)
            else:
                key, parent.key = parent.key, _NO_KEY
                if key is _MERGE:
                    parent.merges.append((value, _line(ev)))
                else:
                    parent.container[key] = value

    def alias(
        self,
        ev: Any,
        stack: list[_Frame],
        anchors: dict[str, tuple[Any, int, int]],
        open_anchors: list[str],
    ) -> tuple[Any, int, int]:
        """(value, size, height) of the node an alias names, within the limits."""
        name = ev.anchor
        if name in open_anchors:
            raise YamlError(
                _line(ev), f"the alias *{quote(name)[1:-1]} is inside the node it names"
            )
        target = anchors.get(name)
        if target is None:
            raise YamlError(_line(ev), f"the alias *{quote(name)[1:-1]} names no anchor")
        _, size, height = target
        self.alias_nodes += size
        if self.alias_nodes > MAX_ALIAS_NODES:
            raise YamlError(_line(ev), f"aliases expand to more than {MAX_ALIAS_NODES} nodes")
        if len(stack) + height > MAX_DEPTH:
            raise YamlError(
                _line(ev),
                f"nested deeper than {MAX_DEPTH} levels (through the alias *{quote(name)[1:-1]})",
            )
        return target

    def key(self, stack: list[_Frame], value: Any, ev: Any) -> Any:
        if value is _MERGE:
            key: Any = _MERGE
            text = "<<"
        elif isinstance(value, str):
            key = text = value
        elif type(ev) is _SCALAR:
            key = text = ev.value  # 1, true, null... as written
        else:
            raise YamlError(_line(ev), "a mapping key must be a string")
        parent = stack[-1]
        if (key is _MERGE and parent.merges) or (key is not _MERGE and key in parent.container):
            raise YamlError(_line(ev), f"duplicate field {quote(_path(stack, text))}")
        return key

    def merge(self, frame: _Frame, stack: list[_Frame]) -> None:
        """Apply ``<<`` (earlier sources win over later ones, the mapping's own keys over all)."""
        merged: dict[str, Any] = {}
        for value, line in frame.merges:
            sources = value if isinstance(value, list) else [value]
            for source in sources:
                if not isinstance(source, dict):
                    raise YamlError(line, "a merge key (<<) takes a mapping or a list of mappings")
                for k, v in source.items():
                    merged.setdefault(k, v)
        own = frame.container
        merged.update(own)
        own.clear()
        own.update(merged)

    def scalar(self, ev: Any, is_key: bool) -> Any:
        """A scalar's value, resolved (the plain ones the memo already holds are taken from it
        by :meth:`document`, which calls this for the others and for ``<<``)."""
        tag = ev.tag
        text = ev.value
        if tag in _UNTAGGED:
            plain = ev.implicit[0]
            tag = self.loader.resolve(yaml.ScalarNode, text, ev.implicit)
            value = self.construct(tag, text, ev)
            if plain and len(text) <= _PLAIN_TEXT_MAX:
                if len(_PLAIN) >= _PLAIN_MAX:
                    _PLAIN.clear()
                _PLAIN[text] = value
        else:
            value = self.construct(tag, text, ev)
        if value is _MERGE and not is_key:
            return "<<"
        return value

    def construct(self, tag: str, text: str, ev: Any) -> Any:
        if tag in (_STR, _VALUE_TAG):
            return text
        if tag == _MERGE_TAG:
            return _MERGE
        node = yaml.ScalarNode(tag, text)
        ld = self.loader
        try:
            if tag == _NULL:
                return None
            if tag == _BOOL:
                return ld.construct_yaml_bool(node)
            if tag == _INT:
                return ld.construct_yaml_int(node)
            if tag == _FLOAT:
                return ld.construct_yaml_float(node)
        except (ValueError, KeyError):
            raise YamlError(
                _line(ev), f"{quote(text)} is not a valid {tag.rsplit(':', 1)[1]}"
            ) from None
        raise YamlError(_line(ev), f"the tag {quote(tag)} is not supported")


# ---------------------------------------------------------------- locating a field


def parse_path(path: str) -> list[str | int]:
    """``spec.rules[0].matches[0].path.type`` -> ``["spec", "rules", 0, "matches", 0, "path",
    "type"]``;
    ``metadata.labels[app.kubernetes.io/name]`` keeps its bracketed key whole."""
    parts: list[str | int] = []
    i, n = 0, len(path)
    word = ""
    while i < n:
        c = path[i]
        if c == ".":
            if word:
                parts.append(word)
            word = ""
        elif c == "[":
            if word:
                parts.append(word)
            word = ""
            close = path.find("]", i)
            if close < 0:
                break
            inner = path[i + 1 : close]
            parts.append(int(inner) if inner.isdigit() else inner)
            i = close
        else:
            word += c
        i += 1
    if word:
        parts.append(word)
    if parts and parts[0] == "<root>":
        parts.pop(0)
    return parts


class _Walk:
    """A collection on the way: is it on the searched path, how deep, what comes next."""

    __slots__ = ("depth", "expect_key", "index", "is_map", "on", "value_on")

    def __init__(self, is_map: bool, on: bool, depth: int) -> None:
        self.is_map, self.on, self.depth = is_map, on, depth
        self.expect_key = True
        self.value_on = False
        self.index = 0


def line_of(text: str, parts: Sequence[str | int]) -> int | None:
    """The 1-based line of the deepest node along ``parts`` in the first document of
    ``text`` (for a mapping entry, its key's line), or None when not even the root is there."""
    loader = Loader(text)
    best: int | None = None
    stack: list[_Walk] = []
    want = len(parts)
    try:
        while loader.check_event():
            ev = loader.get_event()
            cls = type(ev)
            if cls is yaml.DocumentEndEvent:
                break
            if cls is yaml.MappingEndEvent or cls is yaml.SequenceEndEvent:
                stack.pop()
                if stack and stack[-1].is_map:
                    stack[-1].expect_key = not stack[-1].expect_key
                continue
            if cls not in (
                yaml.ScalarEvent,
                yaml.AliasEvent,
                yaml.MappingStartEvent,
                yaml.SequenceStartEvent,
            ):
                continue
            line = ev.start_mark.line + 1
            # Is this node on the path, and does it end the search?
            if not stack:
                on, depth = True, 0
                best = line
            else:
                parent = stack[-1]
                depth = parent.depth + 1
                on = False
                if parent.is_map and parent.expect_key:
                    match = (
                        parent.on
                        and parent.depth < want
                        and cls is yaml.ScalarEvent
                        and ev.value == str(parts[parent.depth])
                    )
                    parent.value_on = match
                    if match:
                        best = line
                        if parent.depth + 1 == want:
                            return best
                    depth = -1  # a key is no step of the path
                elif parent.is_map:
                    on = parent.value_on
                else:
                    index = parent.index
                    parent.index += 1
                    on = (
                        parent.on and parent.depth < want and str(parts[parent.depth]) == str(index)
                    )
                    if on:
                        best = line
                        if parent.depth + 1 == want:
                            return best
            if not stack and want == 0:
                return best
            if cls is yaml.MappingStartEvent or cls is yaml.SequenceStartEvent:
                stack.append(_Walk(cls is yaml.MappingStartEvent, on and depth >= 0, depth))
            elif stack and stack[-1].is_map:
                stack[-1].expect_key = not stack[-1].expect_key
    except yaml.YAMLError:
        pass
    finally:
        loader.dispose()
    return best
