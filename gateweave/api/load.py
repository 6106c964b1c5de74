"""Read manifests from files, directories and stdin, each object located by ``file:line``.

A path is a file, a directory (read recursively: ``*.yaml``, ``*.yml`` and ``*.json``,
skipping dotfiles, dot-directories and editor temporary files) or ``-`` for stdin.
A file holds one or more YAML documents, or JSON; a ``List`` (``kind: List`` or
``kind: <Kind>List`` with ``items``) is flattened into its items. A file that cannot be
read or parsed gives one :class:`LoadError` (file and line) and contributes no objects:
it is never half-loaded. Turning the raw dicts into typed objects is
:func:`gateweave.api.decode.decode`'s job.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from gateweave.api.kinds import KINDS

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
STDIN = "-"


@dataclass(frozen=True)
class Sourced:
    """One raw manifest and where it came from (``line`` is 1-based)."""

    raw: dict[str, Any]
    file: str
    line: int

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class LoadError:
    """A file that could not be read or parsed; ``line`` is 1-based, 0 when unknown."""

    file: str
    line: int
    message: str

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def __str__(self) -> str:
        return f"{self.source}: {self.message}"


@dataclass
class LoadResult:
    objects: list[Sourced] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)

    def extend(self, other: LoadResult) -> None:
        self.objects.extend(other.objects)
        self.errors.extend(other.errors)


class _Malformed(Exception):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


# ---------------------------------------------------------------- which files


def is_manifest_name(name: str) -> bool:
    """True for a file name a directory scan reads (not hidden, not an editor temp file)."""
    if name.startswith((".", "#")) or name.endswith(("~", ".swp", ".swo", ".swx")):
        return False
    return name.endswith(MANIFEST_SUFFIXES)


def is_manifest_path(path: str, root: str) -> bool:
    """True when ``path`` (under directory ``root``) would be read by a scan of ``root``."""
    rel = os.path.relpath(path, root)
    if rel.startswith(os.pardir):
        return False
    *dirs, name = rel.split(os.sep)
    return not any(d.startswith(".") for d in dirs) and is_manifest_name(name)


def iter_manifest_files(directory: str) -> Iterator[str]:
    """Manifest files under ``directory``, recursively, in sorted order."""
    for dirpath, dirnames, filenames in os.walk(directory):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if is_manifest_name(name):
                yield os.path.join(dirpath, name)


# ---------------------------------------------------------------- parsing


def _yaml_loader_class() -> type[yaml.SafeLoader]:
    base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Loader(base):
        """SafeLoader that keeps timestamps as strings, as Kubernetes does."""

    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in base.yaml_implicit_resolvers.items()
    }
    return Loader


_Loader = _yaml_loader_class()


def _yaml_error(exc: yaml.YAMLError) -> _Malformed:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        parts = [p for p in (exc.context, exc.problem) if p]
        return _Malformed(mark.line + 1 if mark else 0, "invalid YAML: " + ", ".join(parts))
    return _Malformed(0, f"invalid YAML: {exc}")


def _yaml_documents(text: str) -> Iterator[tuple[Any, yaml.Node]]:
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                yield loader.construct_document(node), node
    except yaml.YAMLError as exc:
        raise _yaml_error(exc) from exc
    finally:
        loader.dispose()


def _item_nodes(node: yaml.Node | None) -> list[yaml.Node] | None:
    """The nodes of a mapping node's ``items`` sequence, if any."""
    if not isinstance(node, yaml.MappingNode):
        return None
    for key, value in node.value:
        if isinstance(key, yaml.ScalarNode) and key.value == "items" and isinstance(value, yaml.SequenceNode):
            return list(value.value)
    return None


def _is_list(doc: dict[str, Any]) -> bool:
    kind = doc.get("kind")
    if not isinstance(kind, str) or not isinstance(doc.get("items"), list):
        return False
    return kind == "List" or (kind.endswith("List") and kind[: -len("List")] in KINDS)


def _flatten(doc: Any, node: yaml.Node | None, line: int, out: list[tuple[dict[str, Any], int]]) -> None:
    if doc is None:
        return
    if not isinstance(doc, dict):
        raise _Malformed(line, f"expected an object (a mapping), found {type(doc).__name__}")
    if not _is_list(doc):
        _check_object(doc, line)
        out.append((doc, line))
        return
    item_kind = doc["kind"][: -len("List")]
    nodes = _item_nodes(node) or []
    for i, item in enumerate(doc["items"]):
        item_line = nodes[i].start_mark.line + 1 if i < len(nodes) else line
        if item_kind and isinstance(item, dict):
            # <Kind>List items may leave out their apiVersion and kind.
            item = {"apiVersion": doc.get("apiVersion"), "kind": item_kind, **item}
        _flatten(item, nodes[i] if i < len(nodes) else None, item_line, out)


def _check_object(doc: dict[str, Any], line: int) -> None:
    for field_name in ("apiVersion", "kind"):
        value = doc.get(field_name)
        if not isinstance(value, str) or not value:
            raise _Malformed(line, f"object has no {field_name}")


def _parse_json(text: str) -> list[tuple[dict[str, Any], int]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Malformed(exc.lineno, f"invalid JSON: {exc.msg} (column {exc.colno})") from exc
    # Line numbers come from a YAML composition of the same text (JSON is YAML); when
    # that fails on some JSON-only construct, items are located at the document start.
    node: yaml.Node | None = None
    try:
        node = yaml.compose(text.replace("\t", " "), Loader=_Loader)
    except yaml.YAMLError:
        node = None
    line = node.start_mark.line + 1 if node is not None else 1
    out: list[tuple[dict[str, Any], int]] = []
    _flatten(doc, node, line, out)
    return out


def _parse_yaml(text: str) -> list[tuple[dict[str, Any], int]]:
    out: list[tuple[dict[str, Any], int]] = []
    for doc, node in _yaml_documents(text):
        _flatten(doc, node, node.start_mark.line + 1, out)
    return out


def _looks_like_json(text: str) -> bool:
    return text.lstrip()[:1] in ("{", "[")


def load_text(text: str, filename: str) -> LoadResult:
    """Parse one file's text. All of its objects, or none and one error."""
    try:
        if filename.endswith(".json"):
            docs = _parse_json(text)
        elif _looks_like_json(text):
            try:
                docs = _parse_json(text)
            except _Malformed:
                docs = _parse_yaml(text)
        else:
            docs = _parse_yaml(text)
    except _Malformed as exc:
        return LoadResult(errors=[LoadError(filename, exc.line, exc.message)])
    return LoadResult(objects=[Sourced(raw, filename, line) for raw, line in docs])


def load_file(path: str, name: str | None = None) -> LoadResult:
    """Load one file (``-``: stdin); ``name`` is how sources name it (default: ``path``)."""
    name = name or ("<stdin>" if path == STDIN else path)
    try:
        if path == STDIN:
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as fh:
                data = fh.read()
        text = data.decode("utf-8-sig")
    except OSError as exc:
        return LoadResult(errors=[LoadError(name, 0, exc.strerror or str(exc))])
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return LoadResult(errors=[LoadError(name, line, "not UTF-8 text")])
    return load_text(text, name)


def load_paths(paths: Iterable[str]) -> LoadResult:
    """Load every path: a file (read whatever its name), a directory (recursively) or ``-``."""
    result = LoadResult()
    for path in paths:
        if path != STDIN and os.path.isdir(path):
            for file in iter_manifest_files(path):
                result.extend(load_file(file))
        else:
            result.extend(load_file(path))
    return result
